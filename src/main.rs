fn main() {
    println!("ibsm {}", env!("CARGO_PKG_VERSION"));
}

//! Routing engines and route analysis for InfiniBand fabrics.
#![forbid(unsafe_code)]

//! The OpenMetrics 1.0 text format, from gathered metric families.
//!
//! What differs from the Prometheus text format, and is done here:
//! - a counter's family is named without `_total`; its sample carries it;
//! - a gauge named `*_info` whose samples are all 1 is an Info family
//!   (`# TYPE foo info`, sample `foo_info`), as the spec's Info type is;
//! - TYPE before HELP, HELP escaping `\\`, `\n` and `\"`;
//! - `le` and `quantile` label values are canonical numbers (Go's `%g`,
//!   `.0` appended when there is no decimal point or exponent);
//! - the exposition ends with `# EOF`.
//!
//! Label and metric names come from the registry, which has checked them
//! against the names both formats allow.

use std::fmt::Write as _;

use prometheus::proto::{LabelPair, Metric, MetricFamily, MetricType};

/// The content type to answer an `Accept: application/openmetrics-text` with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Encodes `families` (as `Registry::gather` returns them).
pub fn encode(families: &[MetricFamily]) -> String {
    let mut out = String::new();
    encode_families(&mut out, families);
    out.push_str("# EOF\n");
    out
}

/// Appends `families` to `out`, without the closing `# EOF` (the caller
/// may append more families before it).
pub fn encode_families(out: &mut String, families: &[MetricFamily]) {
    for mf in families {
        family(out, mf);
    }
}

fn family(out: &mut String, mf: &MetricFamily) {
    let name = mf.get_name();
    let metrics = mf.get_metric();
    let (family, kind) = match mf.get_field_type() {
        MetricType::COUNTER => (name.strip_suffix("_total").unwrap_or(name), "counter"),
        MetricType::GAUGE if is_info(name, metrics) => (name.strip_suffix("_info").unwrap_or(name), "info"),
        MetricType::GAUGE => (name, "gauge"),
        MetricType::HISTOGRAM => (name, "histogram"),
        MetricType::SUMMARY => (name, "summary"),
        MetricType::UNTYPED => (name, "unknown"),
    };
    let _ = writeln!(out, "# TYPE {family} {kind}");
    if !mf.get_help().is_empty() {
        let _ = writeln!(out, "# HELP {family} {}", escape(mf.get_help()));
    }
    for m in metrics {
        let labels = m.get_label();
        match kind {
            "counter" => sample(out, &format!("{family}_total"), labels, None, &value(m.get_counter().get_value())),
            "info" => sample(out, name, labels, None, "1"),
            "gauge" => sample(out, family, labels, None, &value(m.get_gauge().get_value())),
            // The crate marks untyped as protobuf-only; other collectors
            // may still hand one over.
            #[allow(deprecated)]
            "unknown" => sample(out, family, labels, None, &value(m.get_untyped().get_value())),
            "histogram" => {
                let h = m.get_histogram();
                let bucket = format!("{family}_bucket");
                for b in h.get_bucket() {
                    // The Prometheus client may list +Inf itself; it is
                    // written once, below, from the count.
                    if b.get_upper_bound().is_infinite() {
                        continue;
                    }
                    let le = canonical(b.get_upper_bound());
                    sample(out, &bucket, labels, Some(("le", &le)), &b.get_cumulative_count().to_string());
                }
                let count = h.get_sample_count().to_string();
                sample(out, &bucket, labels, Some(("le", "+Inf")), &count);
                sample(out, &format!("{family}_count"), labels, None, &count);
                sample(out, &format!("{family}_sum"), labels, None, &value(h.get_sample_sum()));
            }
            _ => {
                let s = m.get_summary();
                for q in s.get_quantile() {
                    let quantile = canonical(q.get_quantile());
                    sample(out, family, labels, Some(("quantile", &quantile)), &value(q.get_value()));
                }
                sample(out, &format!("{family}_count"), labels, None, &s.get_sample_count().to_string());
                sample(out, &format!("{family}_sum"), labels, None, &value(s.get_sample_sum()));
            }
        }
    }
}

/// A gauge the Prometheus convention means as Info: `*_info`, every value 1.
fn is_info(name: &str, metrics: &[Metric]) -> bool {
    name.len() > "_info".len()
        && name.ends_with("_info")
        && !metrics.is_empty()
        && metrics.iter().all(|m| m.get_gauge().get_value() == 1.0)
}

fn sample(out: &mut String, name: &str, labels: &[LabelPair], extra: Option<(&str, &str)>, value: &str) {
    out.push_str(name);
    if !labels.is_empty() || extra.is_some() {
        out.push('{');
        let pairs = labels.iter().map(|l| (l.get_name(), l.get_value())).chain(extra);
        for (i, (k, v)) in pairs.enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(v));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

/// OpenMetrics' escaped-string: backslash, newline and double quote (the
/// same set for label values and HELP).
fn escape(s: &str) -> String {
    let mut e = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => e.push_str("\\\\"),
            '\n' => e.push_str("\\n"),
            '"' => e.push_str("\\\""),
            c => e.push(c),
        }
    }
    e
}

/// A sample value: integers without a decimal point, other reals in
/// Rust's shortest round-trip form, and the spec's spellings of the
/// non-real values.
fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        // Shortest round-trip; `{:e}` keeps huge and tiny values short and
        // is a valid OpenMetrics float (a mantissa, `e`, an exponent).
        let fixed = format!("{v}");
        if fixed.len() <= 24 {
            fixed
        } else {
            format!("{v:e}")
        }
    }
}

/// The spec's canonical number for `le` and `quantile` values: Go's
/// shortest `%g` (exponent form below 1e-4 and from 1e+06 on, the exponent
/// signed and at least two digits), with `.0` appended when the result has
/// neither a decimal point nor an exponent.
pub(super) fn canonical(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if v == 0.0 {
        return "0.0".into();
    }
    // Shortest digits, in scientific form: "1.1e23", "1e-5", "2.5e0".
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` always writes an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` writes a decimal exponent");
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let fixed = format!("{v}");
    if fixed.contains('.') {
        fixed
    } else {
        fixed + ".0"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Counter, CounterVec, Gauge, GaugeVec, Histogram, HistogramOpts, Opts, Registry};

    #[test]
    fn canonical_numbers_follow_the_spec_examples() {
        // OpenMetrics 1.0, "Considerations: Canonical Numbers".
        for (v, s) in [
            (0.0, "0.0"),
            (0.001, "0.001"),
            (0.002, "0.002"),
            (0.01, "0.01"),
            (0.1, "0.1"),
            (0.9, "0.9"),
            (0.95, "0.95"),
            (0.99, "0.99"),
            (0.999, "0.999"),
            (1.0, "1.0"),
            (1.7, "1.7"),
            (10.0, "10.0"),
            (1e-10, "1e-10"),
            (1e-9, "1e-09"),
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (1e5, "100000.0"),
            (1e6, "1e+06"),
            (1e10, "1e+10"),
            (1e23, "1e+23"),
            (1.1e23, "1.1e+23"),
            (2.5, "2.5"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(canonical(v), s, "{v}");
        }
    }

    #[test]
    fn values_are_integers_floats_or_the_non_reals() {
        assert_eq!(value(3.0), "3");
        assert_eq!(value(0.25), "0.25");
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(value(1e300), "1e300");
        assert_eq!(value(-2.0), "-2");
    }

    fn registry() -> Registry {
        let r = Registry::new_custom(Some("t".into()), None).unwrap();
        let c =
            CounterVec::new(Opts::new("events_total", "Events, \"quoted\"\nand a \\ backslash"), &["what"]).unwrap();
        c.with_label_values(&["a \"b\"\nc\\d"]).inc_by(2.0);
        c.with_label_values(&["plain"]).inc();
        let g = Gauge::new("temperature", "A gauge").unwrap();
        g.set(21.5);
        let info = GaugeVec::new(Opts::new("build_info", "What is running"), &["version"]).unwrap();
        info.with_label_values(&["1.2"]).set(1.0);
        let not_info = Gauge::new("odd_info", "Not all ones").unwrap();
        not_info.set(2.0);
        let h =
            Histogram::with_opts(HistogramOpts::new("wait_seconds", "Waits").buckets(vec![0.001, 1.0, 1e6])).unwrap();
        h.observe(0.5);
        h.observe(2.0);
        let bare = Counter::new("bare", "A counter without the suffix").unwrap();
        bare.inc();
        for m in [
            Box::new(c) as Box<dyn prometheus::core::Collector>,
            Box::new(g),
            Box::new(info),
            Box::new(not_info),
            Box::new(h),
            Box::new(bare),
        ] {
            r.register(m).unwrap();
        }
        r
    }

    #[test]
    fn families_are_encoded_as_the_spec_writes_them() {
        let text = encode(&registry().gather());
        let want = "\
# TYPE t_bare counter
# HELP t_bare A counter without the suffix
t_bare_total 1
# TYPE t_build info
# HELP t_build What is running
t_build_info{version=\"1.2\"} 1
# TYPE t_events counter
# HELP t_events Events, \\\"quoted\\\"\\nand a \\\\ backslash
t_events_total{what=\"a \\\"b\\\"\\nc\\\\d\"} 2
t_events_total{what=\"plain\"} 1
# TYPE t_odd_info gauge
# HELP t_odd_info Not all ones
t_odd_info 2
# TYPE t_temperature gauge
# HELP t_temperature A gauge
t_temperature 21.5
# TYPE t_wait_seconds histogram
# HELP t_wait_seconds Waits
t_wait_seconds_bucket{le=\"0.001\"} 0
t_wait_seconds_bucket{le=\"1.0\"} 1
t_wait_seconds_bucket{le=\"1e+06\"} 2
t_wait_seconds_bucket{le=\"+Inf\"} 2
t_wait_seconds_count 2
t_wait_seconds_sum 2.5
# EOF
";
        assert_eq!(text, want);
    }

    #[test]
    fn every_line_is_metadata_a_sample_or_the_end() {
        let text = encode(&registry().gather());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.last(), Some(&"# EOF"), "the exposition ends with # EOF");
        assert_eq!(lines.iter().filter(|l| l.starts_with("# EOF")).count(), 1);
        let mut families = std::collections::HashSet::new();
        for l in &lines[..lines.len() - 1] {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(families.insert(name.to_string()), "{name} declared twice");
                assert!(!name.ends_with("_total"), "counter family {name} keeps _total");
            } else if l.starts_with('#') {
                assert!(l.starts_with("# HELP "), "only TYPE, HELP and EOF lines start with #: {l}");
            } else {
                // name[{labels}] value: the value parses as a number.
                let v = l.rsplit(' ').next().unwrap();
                assert!(v.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&v), "{l}");
            }
        }
    }

    #[test]
    fn an_empty_registry_is_just_the_end() {
        assert_eq!(encode(&[]), "# EOF\n");
    }
}

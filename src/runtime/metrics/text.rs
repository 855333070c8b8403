//! Sections of the exposition written as text directly, beside the
//! registry: for families too large to go through `prometheus`'s
//! `MetricFamily` (one protobuf `Metric`, its `LabelPair`s and their
//! `String`s per series; the performance manager's per-port counters are
//! over a million series on a large fabric). A section writes straight
//! into the output buffer, and these helpers escape and format without
//! allocating.
//!
//! Names are written whole (with [`super::PREFIX`]), and must be valid in
//! both formats; label values and HELP are escaped here.

use std::fmt::Write as _;

/// Families rendered as text by their owner; see
/// [`super::Metrics::register_text`].
pub trait TextSection: Send + Sync {
    /// Appends the section in the Prometheus text format 0.0.4: per family
    /// `# HELP`, `# TYPE`, then its samples; each family once.
    fn write_text(&self, out: &mut String);
    /// Appends the section in OpenMetrics 1.0 (without `# EOF`): counter
    /// families named without `_total` in TYPE and HELP, TYPE first, the
    /// samples with `_total`.
    fn write_openmetrics(&self, out: &mut String);
    /// Every series name the section can emit, as the Prometheus text
    /// format spells them (counters with `_total`), whether or not it has
    /// samples now.
    fn family_names(&self) -> Vec<String>;
    /// About how many bytes the next text rendering appends (a first
    /// render's buffer is sized from it; later ones from the last size).
    fn size_hint(&self) -> usize {
        0
    }
}

/// The exposition format a section writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
}

/// Writes a counter family's metadata: `name` ends in `_total`, as the
/// Prometheus text format names counters.
pub fn counter_header(out: &mut String, format: Format, name: &str, help: &str) {
    match format {
        Format::Text => {
            out.push_str("# HELP ");
            out.push_str(name);
            out.push(' ');
            push_escaped(out, help, false);
            out.push_str("\n# TYPE ");
            out.push_str(name);
            out.push_str(" counter\n");
        }
        Format::OpenMetrics => {
            let family = name.strip_suffix("_total").unwrap_or(name);
            out.push_str("# TYPE ");
            out.push_str(family);
            out.push_str(" counter\n# HELP ");
            out.push_str(family);
            out.push(' ');
            push_escaped(out, help, true);
            out.push('\n');
        }
    }
}

/// Appends `s` escaped: backslash and newline always, the double quote
/// when `quote` (label values in both formats, HELP in OpenMetrics; the
/// text format's HELP keeps its quotes).
pub fn push_escaped(out: &mut String, s: &str, quote: bool) {
    let mut rest = s;
    while let Some(i) = rest.find(|c| c == '\\' || c == '\n' || (quote && c == '"')) {
        out.push_str(&rest[..i]);
        out.push_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'\n' => "\\n",
            _ => "\\\"",
        });
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

/// Appends a label value, escaped and quoted.
pub fn push_label_value(out: &mut String, v: &str) {
    out.push('"');
    push_escaped(out, v, true);
    out.push('"');
}

/// Appends a counter's value as both encoders write the `f64` the
/// `prometheus` crate holds: exact below 2^53 (where every integer is an
/// `f64`), beyond as that `f64`'s shortest decimal.
pub fn push_u64_value(out: &mut String, v: u64) {
    if v <= 1 << 53 {
        let _ = write!(out, "{v}");
    } else {
        let _ = write!(out, "{}", v as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_each_context() {
        let mut s = String::new();
        push_escaped(&mut s, "a \"b\"\nc\\d", false);
        assert_eq!(s, "a \"b\"\\nc\\\\d");
        s.clear();
        push_label_value(&mut s, "a \"b\"\nc\\d\\");
        assert_eq!(s, "\"a \\\"b\\\"\\nc\\\\d\\\\\"");
        s.clear();
        push_label_value(&mut s, "plain é");
        assert_eq!(s, "\"plain é\"");
    }

    #[test]
    fn values_are_the_f64_the_crate_would_print() {
        for v in [0, 1, 40, 1 << 53, (1 << 53) + 1, u64::MAX, 123_456_789_012_345_678] {
            let mut s = String::new();
            push_u64_value(&mut s, v);
            assert_eq!(s, (v as f64).to_string(), "{v}");
        }
    }

    #[test]
    fn headers_differ_by_format() {
        let mut s = String::new();
        counter_header(&mut s, Format::Text, "x_total", "say \"hi\"\n");
        counter_header(&mut s, Format::OpenMetrics, "x_total", "say \"hi\"\n");
        assert_eq!(
            s,
            "# HELP x_total say \"hi\"\\n\n# TYPE x_total counter\n# TYPE x counter\n# HELP x say \\\"hi\\\"\\n\n"
        );
    }
}

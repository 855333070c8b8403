//! NodeDescription (IBA 14.2.5.2): 64 bytes of text naming the
//! node, conventionally UTF-8 and NUL-padded (a full 64-byte string has no
//! terminator).

use super::{attribute_view, AttributeId, WireResult};

mod field {
    use std::ops::Range;
    pub const TEXT: Range<usize> = 0..64;
    pub const LEN: usize = 64;
}

attribute_view! {
    /// A zero-copy view of a NodeDescription attribute (64 bytes).
    NodeDescription, NodeDescriptionRepr, "NodeDescription", field::LEN, AttributeId::NodeDescription
}

impl<T: AsRef<[u8]>> NodeDescription<T> {
    /// Bytes 0-63, raw.
    pub fn raw(&self) -> &[u8] {
        &self.buffer.as_ref()[field::TEXT]
    }
    /// The bytes before the first NUL (all 64 if there is none).
    pub fn text_bytes(&self) -> &[u8] {
        let raw = self.raw();
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        &raw[..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NodeDescription<T> {
    /// Writes `text` NUL-padded, cut to 64 bytes.
    pub fn set_text_bytes(&mut self, text: &[u8]) {
        let out = &mut self.buffer.as_mut()[field::TEXT];
        out.fill(0);
        let n = text.len().min(field::LEN);
        out[..n].copy_from_slice(&text[..n]);
    }
}

/// The owned form: the description as text. Invalid UTF-8 is replaced
/// (U+FFFD) rather than refused; a node's name is for people, and one odd
/// vendor string must not hide the node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NodeDescriptionRepr {
    pub text: String,
}

impl NodeDescriptionRepr {
    pub fn new(text: impl Into<String>) -> Self {
        NodeDescriptionRepr { text: text.into() }
    }

    /// Replacement characters are 3 bytes, so a lossy conversion can grow
    /// past 64 bytes; the text is cut back to what `emit` would write, which
    /// makes parse -> emit -> parse the identity.
    pub fn parse<T: AsRef<[u8]>>(v: &NodeDescription<T>) -> WireResult<Self> {
        let mut r = NodeDescriptionRepr { text: String::from_utf8_lossy(v.text_bytes()).into_owned() };
        let keep = r.wire_text().len();
        r.text.truncate(keep);
        Ok(r)
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    /// Writes the text NUL-padded. Text longer than 64 bytes is cut at the
    /// last character boundary at or before byte 64, so the wire never holds
    /// half a UTF-8 sequence we produced.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut NodeDescription<T>) {
        v.set_text_bytes(self.wire_text().as_bytes());
    }

    /// The text as it will appear on the wire (after truncation).
    pub fn wire_text(&self) -> &str {
        let mut end = self.text.len().min(field::LEN);
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        &self.text[..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn nul_padded() {
        let b = NodeDescriptionRepr::new("ibsim switch 1").to_bytes();
        assert_eq!(&b[..14], b"ibsim switch 1");
        assert!(b[14..].iter().all(|&x| x == 0));
        assert_eq!(NodeDescriptionRepr::parse_bytes(&b).unwrap().text, "ibsim switch 1");
    }

    #[test]
    fn full_length_has_no_terminator() {
        let b = [b'x'; 64];
        assert_eq!(NodeDescriptionRepr::parse_bytes(&b).unwrap().text, "x".repeat(64));
    }

    #[test]
    fn emit_truncates_on_char_boundary() {
        // 63 ASCII bytes then a 2-byte character: only the ASCII fits.
        let text = format!("{}é", "a".repeat(63));
        let r = NodeDescriptionRepr::new(text);
        let b = r.to_bytes();
        assert_eq!(&b[..63], "a".repeat(63).as_bytes());
        assert_eq!(b[63], 0);
        assert_eq!(r.wire_text().len(), 63);
        let long = NodeDescriptionRepr::new("b".repeat(100));
        assert_eq!(NodeDescriptionRepr::parse_bytes(&long.to_bytes()).unwrap().text, "b".repeat(64));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let mut b = [0u8; 64];
        b[..3].copy_from_slice(&[b'a', 0xff, b'b']);
        assert_eq!(NodeDescriptionRepr::parse_bytes(&b).unwrap().text, "a\u{fffd}b");
    }

    #[test]
    fn replacement_characters_do_not_overflow() {
        let mut b = [0x01u8; 64];
        b[62] = 0xff;
        b[63] = 0xfe;
        let r = NodeDescriptionRepr::parse_bytes(&b).unwrap();
        assert!(r.text.len() <= 64);
        assert!(r.text.starts_with(&"\u{1}".repeat(62)));
        assert_eq!(NodeDescriptionRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            NodeDescriptionRepr::parse_bytes(&[0; 63]),
            Err(WireError::Truncated { what: "NodeDescription", len: 63, need: 64 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(text in "[^\u{0}]{0,64}") {
            let r = NodeDescriptionRepr::new(text);
            let back = NodeDescriptionRepr::parse_bytes(&r.to_bytes()).unwrap();
            prop_assert_eq!(back.text.as_str(), r.wire_text());
        }
    }
}

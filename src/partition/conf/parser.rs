//! The grammar: entries, their definitions and flags, member items and
//! `mgid=` lines, read from the tokens into the builder.

use std::net::Ipv6Addr;

use super::build::{Builder, MgidItem};
use super::entry::{Header, PKeyWord, Written};
use super::error::{excerpt, Fail, Pos, Problem};
use super::lexer::{Lexer, Tok};
use super::value::{c_number, parse_membership, resolve_flag, Flag, NumError};
use super::{MemberSpec, PortSpec};
use crate::partition::{Membership, PARTITION_MASK};
use crate::types::Guid;

pub(super) struct Parser<'a> {
    pub(super) lex: Lexer<'a>,
    pub(super) b: Builder,
}

impl<'a> Parser<'a> {
    pub(super) fn file(&mut self) -> Result<(), Fail> {
        loop {
            let t = self.lex.next_skipping_lines();
            match t.tok {
                Tok::Eof => return Ok(()),
                // An empty entry: OpenSM skips a stray ';' too.
                Tok::Semi => continue,
                _ => {
                    self.lex.peeked = Some(t);
                    self.entry(t.at)?;
                }
            }
        }
    }

    fn entry(&mut self, start: Pos) -> Result<(), Fail> {
        let header = self.header(start)?;
        let part = self.b.partition_for(&header)?;
        self.members(start, part, &header)
    }

    fn header(&mut self, start: Pos) -> Result<Header, Fail> {
        let mut h = Header {
            start,
            name: None,
            pkey: None,
            ipoib: false,
            indx0: false,
            defmember: None,
            written: Written::default(),
        };
        let eof = |pos: Pos| (pos, Problem::UnexpectedEof { expected: "':' and the members", start });
        // Name words (on one line: the name may have blanks inside, as in
        // OpenSM), then '=' and the P_Key.
        let mut name: Option<(usize, usize, Pos)> = None;
        let mut after_eq = false;
        let mut pkey_word: Option<(&str, Pos)> = None;
        let end = loop {
            let t = self.lex.next_skipping_lines();
            match t.tok {
                Tok::Word(w) if !after_eq => match name {
                    None => name = Some((t.start, t.start + w.len(), t.at)),
                    Some((s, _, at)) if at.line == t.at.line => name = Some((s, t.start + w.len(), at)),
                    Some(_) => {
                        return Err((t.at, Problem::Expected { expected: "'=', ',' or ':'", found: t.describe() }))
                    }
                },
                Tok::Word(w) if pkey_word.is_none() => pkey_word = Some((w, t.at)),
                Tok::Word(_) | Tok::Eq if after_eq => {
                    return Err((
                        t.at,
                        Problem::Expected { expected: "',' or ':' after the P_Key", found: t.describe() },
                    ))
                }
                Tok::Eq => after_eq = true,
                Tok::Comma | Tok::Colon => break t,
                Tok::Semi => return Err((t.at, Problem::NoColon { start })),
                Tok::Eof | Tok::Word(_) | Tok::Newline => return Err(eof(self.lex.pos)),
            }
        };
        if after_eq && pkey_word.is_none() {
            return Err((end.at, Problem::Expected { expected: "a P_Key after '='", found: end.describe() }));
        }
        let name = name.map(|(s, e, at)| (self.lex.src[s..e].to_string(), at));
        match (name, pkey_word) {
            // OpenSM: a definition that starts with a digit and has no '='
            // is a P_Key without a name.
            (Some((n, at)), None) if n.starts_with(|c: char| c.is_ascii_digit()) => h.pkey = Some(parse_pkey(&n, at)?),
            (name, pkey) => {
                h.name = name;
                if let Some((w, at)) = pkey {
                    h.pkey = Some(parse_pkey(w, at)?);
                }
            }
        }
        // Flags.
        let mut t = end;
        while t.tok == Tok::Comma {
            let f = self.lex.next_skipping_lines();
            let flag_word = match f.tok {
                Tok::Word(w) => w,
                // An empty flag (",,"): OpenSM skips it.
                Tok::Comma | Tok::Colon => {
                    t = f;
                    continue;
                }
                Tok::Semi => return Err((f.at, Problem::NoColon { start })),
                Tok::Eof | Tok::Newline => return Err(eof(self.lex.pos)),
                Tok::Eq => return Err((f.at, Problem::Expected { expected: "a flag", found: f.describe() })),
            };
            let flag = resolve_flag(flag_word).map_err(|p| (f.at, p))?;
            let mut next = self.lex.next_skipping_lines();
            let value = if next.tok == Tok::Eq {
                let v = self.lex.next_skipping_lines();
                let Tok::Word(value) = v.tok else {
                    return Err((v.at, Problem::Expected { expected: "a value after '='", found: v.describe() }));
                };
                next = self.lex.next_skipping_lines();
                Some((value, v.at))
            } else {
                None
            };
            self.header_flag(&mut h, flag, f.at, value)?;
            match next.tok {
                Tok::Comma | Tok::Colon => t = next,
                Tok::Semi => return Err((next.at, Problem::NoColon { start })),
                Tok::Eof | Tok::Newline => return Err(eof(self.lex.pos)),
                Tok::Word(_) | Tok::Eq => {
                    return Err((
                        next.at,
                        Problem::Expected { expected: "',' or ':' after a flag", found: next.describe() },
                    ))
                }
            }
        }
        Ok(h)
    }

    fn header_flag(
        &mut self,
        h: &mut Header,
        flag: Flag,
        flag_at: Pos,
        value: Option<(&str, Pos)>,
    ) -> Result<(), Fail> {
        match (flag, value) {
            (Flag::Ipoib | Flag::Indx0, Some((_, at))) => Err((at, Problem::UnexpectedValue(flag.name()))),
            (Flag::Ipoib, None) => {
                h.ipoib = true;
                Ok(())
            }
            (Flag::Indx0, None) => {
                h.indx0 = true;
                Ok(())
            }
            (_, None) => Err((flag_at, Problem::MissingValue(flag.name()))),
            (Flag::DefMember, Some((v, at))) => {
                let m = parse_membership(v).ok_or_else(|| (at, Problem::BadMembership(excerpt(v))))?;
                match h.defmember {
                    Some(old) if old != m => Err((at, Problem::RepeatedFlag { flag: flag.name() })),
                    _ => {
                        h.defmember = Some(m);
                        Ok(())
                    }
                }
            }
            (_, Some((v, at))) => h.written.apply(flag, v, at, &mut self.b.warnings),
        }
    }

    fn members(&mut self, start: Pos, part: usize, h: &Header) -> Result<(), Fail> {
        let eof = |pos: Pos| (pos, Problem::UnexpectedEof { expected: "';' at the end of the entry", start });
        loop {
            let t = self.lex.next();
            let word = match t.tok {
                Tok::Newline | Tok::Comma => continue,
                Tok::Semi => return Ok(()),
                Tok::Eof => return Err(eof(self.lex.pos)),
                Tok::Colon => return Err((t.at, Problem::ColonInMembers { start })),
                Tok::Eq => return Err((t.at, Problem::Expected { expected: "a member", found: t.describe() })),
                Tok::Word(w) => w,
            };
            let mut next = self.lex.next();
            if word.eq_ignore_ascii_case("mgid") {
                if next.tok != Tok::Eq {
                    return Err((
                        next.at,
                        Problem::Expected { expected: "'=' and an MGID after 'mgid'", found: next.describe() },
                    ));
                }
                if self.mgid_line(start, part, t.at)? {
                    return Ok(());
                }
                continue;
            }
            let value = if next.tok == Tok::Eq {
                let v = self.lex.next();
                let Tok::Word(value) = v.tok else {
                    return Err((
                        v.at,
                        Problem::Expected { expected: "full, limited or both after '='", found: v.describe() },
                    ));
                };
                next = self.lex.next();
                Some((value, v.at))
            } else {
                None
            };
            // An item that reads badly on a line with a ':' is most likely
            // the next entry, after a missing ';'.
            let missing_semi = |lex: &Lexer, p: Problem| match (next.tok, lex.colon_later_on_line()) {
                (_, _) if matches!(p, Problem::FlagAmongMembers(_)) => (t.at, p),
                (Tok::Colon, _) => (next.at, Problem::ColonInMembers { start }),
                (_, Some(at)) => (at, Problem::ColonInMembers { start }),
                (_, None) => (t.at, p),
            };
            let membership = match value {
                Some((v, at)) => match parse_membership(v) {
                    Some(m) => m,
                    None => {
                        let e = missing_semi(&self.lex, Problem::BadMembership(excerpt(v)));
                        return Err(if e.0 == t.at { (at, e.1) } else { e });
                    }
                },
                None => h.defmember.unwrap_or(Membership::Limited),
            };
            match parse_port(word) {
                Ok(Some(port)) => {
                    self.b.parts[part].members.push(MemberSpec { port, membership, indx0: h.indx0, at: Some(t.at) })
                }
                Ok(None) => {}
                Err(p) => return Err(missing_semi(&self.lex, p)),
            }
            match next.tok {
                Tok::Comma | Tok::Newline => {}
                Tok::Semi => return Ok(()),
                Tok::Eof => return Err(eof(self.lex.pos)),
                Tok::Colon => return Err((next.at, Problem::ColonInMembers { start })),
                Tok::Word(_) | Tok::Eq => {
                    return Err((
                        next.at,
                        Problem::Expected { expected: "',' or ';' after a member", found: next.describe() },
                    ))
                }
            }
        }
    }

    /// After `mgid=`: the GID and its flags up to the end of the line.
    /// True when a ';' ended the entry too.
    fn mgid_line(&mut self, start: Pos, part: usize, item_at: Pos) -> Result<bool, Fail> {
        let (text, gid_at) = self.lex.raw_gid();
        if text.is_empty() {
            let t = self.lex.peek();
            return Err((t.at, Problem::Expected { expected: "an MGID after 'mgid='", found: t.describe() }));
        }
        let mgid = parse_mgid(text).map_err(|p| (gid_at, p))?;
        let mut written = Written::default();
        let ended = loop {
            let t = self.lex.next();
            match t.tok {
                Tok::Newline => break false,
                Tok::Semi => break true,
                Tok::Eof => {
                    return Err((
                        self.lex.pos,
                        Problem::UnexpectedEof { expected: "';' at the end of the entry", start },
                    ))
                }
                Tok::Comma => {}
                _ => {
                    return Err((
                        t.at,
                        Problem::Expected { expected: "',' before a multicast group flag", found: t.describe() },
                    ))
                }
            }
            // A flag, or nothing (a trailing ',').
            let f = self.lex.next();
            let flag_word = match f.tok {
                Tok::Word(w) => w,
                Tok::Newline => break false,
                Tok::Semi => break true,
                Tok::Comma => {
                    self.lex.peeked = Some(f);
                    continue;
                }
                Tok::Eof => {
                    return Err((
                        self.lex.pos,
                        Problem::UnexpectedEof { expected: "';' at the end of the entry", start },
                    ))
                }
                _ => return Err((f.at, Problem::Expected { expected: "a multicast group flag", found: f.describe() })),
            };
            let flag = resolve_flag(flag_word).map_err(|p| (f.at, hint_members_after_mgid(p, flag_word)))?;
            if !flag.is_group_flag() {
                return Err((f.at, Problem::NotAGroupFlag(flag.name().into())));
            }
            let eq = self.lex.next();
            if eq.tok != Tok::Eq {
                return Err((f.at, Problem::MissingValue(flag.name())));
            }
            let v = self.lex.next();
            let Tok::Word(value) = v.tok else {
                return Err((v.at, Problem::Expected { expected: "a value after '='", found: v.describe() }));
            };
            written.apply(flag, value, v.at, &mut self.b.warnings)?;
        };
        self.b.parts[part].mgids.push(MgidItem { mgid, written, at: item_at });
        Ok(ended)
    }
}

/// A port keyword or GUID on a `mgid=` line reads as a flag: say why.
fn hint_members_after_mgid(p: Problem, word: &str) -> Problem {
    match (&p, parse_port(word)) {
        (Problem::UnknownFlag(_), Ok(Some(_))) => Problem::Expected {
            expected: "a multicast group flag (a mgid= item takes the rest of its line: put members on another line)",
            found: format!("'{}'", excerpt(word)),
        },
        _ => p,
    }
}

fn parse_pkey(word: &str, at: Pos) -> Result<PKeyWord, Fail> {
    let bad = |why: &str| (at, Problem::BadPKey { value: excerpt(word), why: why.into() });
    let n = match c_number(word) {
        Ok(n) => n,
        Err(NumError::NotNumber) => return Err(bad("not a number (0x hex, 0 octal or decimal)")),
        Err(NumError::TooLarge) => return Err(bad("more than 16 bits")),
    };
    // OpenSM would cut such a number to 16 bits and then to 15, so that a
    // stray digit (0x18001) lands silently on some other partition: no
    // file means that on purpose.
    if n > 0xffff {
        return Err(bad("more than 16 bits"));
    }
    let written = n as u16;
    // Bit 15 is a port's membership, which the file gives per member, so
    // OpenSM keeps only the low 15 bits; files written with a full-member
    // key (0xffff for the default partition) must load here as they do
    // there.
    let partition = written & PARTITION_MASK;
    // OpenSM reads a partition number of 0 as no P_Key at all and generates
    // one: a number written on purpose would silently become another.
    if partition == 0 {
        return Err(bad(if written == 0 {
            "0 is no partition (omit the P_Key to have one generated)"
        } else {
            "its low 15 bits, the partition number, are 0 (omit the P_Key to have one generated)"
        }));
    }
    Ok(PKeyWord { partition, written, at })
}

fn parse_port(word: &str) -> Result<Option<PortSpec>, Problem> {
    let kw = [
        ("ALL", PortSpec::All),
        ("ALL_CAS", PortSpec::AllCas),
        ("ALL_SWITCHES", PortSpec::AllSwitches),
        ("ALL_ROUTERS", PortSpec::AllRouters),
        ("SELF", PortSpec::SelfPort),
    ];
    if word.eq_ignore_ascii_case("NONE") {
        return Ok(None);
    }
    if let Some((_, p)) = kw.iter().find(|(k, _)| word.eq_ignore_ascii_case(k)) {
        return Ok(Some(*p));
    }
    match c_number(word) {
        Ok(0) => Err(Problem::BadGuid { value: excerpt(word), why: "GUID 0 is no port" }),
        Ok(g) => Ok(Some(PortSpec::Guid(Guid(g)))),
        Err(NumError::TooLarge) => Err(Problem::BadGuid { value: excerpt(word), why: "more than 64 bits" }),
        Err(NumError::NotNumber) => {
            if resolve_flag(word).is_ok() {
                return Err(Problem::FlagAmongMembers(excerpt(word)));
            }
            Err(Problem::BadGuid {
                value: excerpt(word),
                why: "want a port GUID (0x...) or ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF, NONE",
            })
        }
    }
}

fn parse_mgid(text: &str) -> Result<[u8; 16], Problem> {
    let bad = |why| Problem::BadMgid { value: excerpt(text), why };
    let addr: Ipv6Addr = text.parse().map_err(|_| bad("not a GID in IPv6 notation (such as ff12:401b::1)"))?;
    let m = addr.octets();
    if m[0] != 0xff {
        return Err(bad("not a multicast GID (the first byte must be 0xff)"));
    }
    Ok(m)
}

//! The tokens of the grammar and where each stands: words, the
//! punctuation `= , : ;` and line breaks (they separate member items);
//! blanks and `#` comments are skipped. Positions count characters.

use super::error::{excerpt, Pos};

pub(super) fn end_pos(text: &str) -> Pos {
    let mut pos = Pos { line: 1, col: 1 };
    for c in text.chars() {
        advance(&mut pos, c);
    }
    pos
}

fn advance(pos: &mut Pos, c: char) {
    if c == '\n' {
        pos.line = pos.line.saturating_add(1);
        pos.col = 1;
    } else {
        pos.col = pos.col.saturating_add(1);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tok<'a> {
    Word(&'a str),
    Eq,
    Comma,
    Colon,
    Semi,
    Newline,
    Eof,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Token<'a> {
    pub(super) tok: Tok<'a>,
    pub(super) at: Pos,
    /// Byte offset in the text.
    pub(super) start: usize,
}

impl Token<'_> {
    pub(super) fn describe(&self) -> String {
        match self.tok {
            Tok::Word(w) => format!("'{}'", excerpt(w)),
            Tok::Eq => "'='".into(),
            Tok::Comma => "','".into(),
            Tok::Colon => "':'".into(),
            Tok::Semi => "';'".into(),
            Tok::Newline => "the end of the line".into(),
            Tok::Eof => "the end of the file".into(),
        }
    }
}

fn is_punct(c: char) -> bool {
    matches!(c, '=' | ',' | ':' | ';' | '#')
}

pub(super) struct Lexer<'a> {
    pub(super) src: &'a str,
    /// Byte offset of the next character.
    i: usize,
    pub(super) pos: Pos,
    pub(super) peeked: Option<Token<'a>>,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Lexer { src, i: 0, pos: Pos { line: 1, col: 1 }, peeked: None }
    }

    fn peek_char(&self) -> Option<char> {
        self.src[self.i..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.i += c.len_utf8();
        advance(&mut self.pos, c);
        Some(c)
    }

    /// Skips blanks and comments, not line breaks.
    fn skip_blanks(&mut self) {
        while let Some(c) = self.peek_char() {
            if c == '#' {
                while self.peek_char().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else if c != '\n' && c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
    }

    /// A run of characters up to a blank or one of `stop`.
    fn run(&mut self, stop: fn(char) -> bool) -> &'a str {
        let start = self.i;
        while self.peek_char().is_some_and(|c| !c.is_whitespace() && !stop(c)) {
            self.bump();
        }
        &self.src[start..self.i]
    }

    pub(super) fn next(&mut self) -> Token<'a> {
        if let Some(t) = self.peeked.take() {
            return t;
        }
        self.skip_blanks();
        let (at, start) = (self.pos, self.i);
        let tok = match self.peek_char() {
            None => Tok::Eof,
            Some(c) => {
                let single = match c {
                    '\n' => Some(Tok::Newline),
                    '=' => Some(Tok::Eq),
                    ',' => Some(Tok::Comma),
                    ':' => Some(Tok::Colon),
                    ';' => Some(Tok::Semi),
                    _ => None,
                };
                match single {
                    Some(t) => {
                        self.bump();
                        t
                    }
                    None => Tok::Word(self.run(is_punct)),
                }
            }
        };
        Token { tok, at, start }
    }

    pub(super) fn peek(&mut self) -> Token<'a> {
        let t = self.next();
        self.peeked = Some(t);
        t
    }

    /// The next token that is not a line break.
    pub(super) fn next_skipping_lines(&mut self) -> Token<'a> {
        loop {
            let t = self.next();
            if t.tok != Tok::Newline {
                return t;
            }
        }
    }

    /// A GID after `mgid=`: it has colons of its own, so it runs to a
    /// blank, ',', ';' or '#'. Empty when none of it is there.
    pub(super) fn raw_gid(&mut self) -> (&'a str, Pos) {
        if let Some(t) = self.peeked.take() {
            // Not reached (the caller has consumed its lookahead), but a
            // peeked token must not be lost: rewind to it.
            self.i = t.start;
            self.pos = t.at;
        }
        self.skip_blanks();
        let at = self.pos;
        (self.run(|c| matches!(c, ',' | ';' | '#')), at)
    }

    /// Where a ':' stands later on the current line, if one does: a member
    /// list that reads badly because the previous entry lacks its ';'.
    pub(super) fn colon_later_on_line(&self) -> Option<Pos> {
        let from = self.peeked.map_or(self.i, |t| t.start);
        let rest = &self.src[from..];
        let line = &rest[..rest.find(['\n', '#']).unwrap_or(rest.len())];
        let k = line.find(':')?;
        let mut pos = self.peeked.map_or(self.pos, |t| t.at);
        for c in line[..k].chars() {
            advance(&mut pos, c);
        }
        Some(pos)
    }
}

//! The error type shared by the trace and profile parsers.

use std::fmt;

/// An error in a trace or profile file, located by file name and (when known) line.
///
/// Displayed as `FILE:LINE: message`, or `FILE: message` when the problem is not tied to
/// a line (an empty file, a missing file), which is the format editors and terminals
/// recognise as a clickable location.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ParseError {
    /// The file name (or other source label) the text came from, as given by the caller.
    pub source_name: String,
    /// 1-based line number, when the error is tied to a line.
    pub line: Option<usize>,
    /// What was wrong and what is accepted.
    pub message: String,
}

impl ParseError {
    pub(crate) fn at_line(source_name: &str, line: usize, message: impl Into<String>) -> Self {
        ParseError {
            source_name: source_name.to_string(),
            line: Some(line),
            message: message.into(),
        }
    }

    pub(crate) fn whole_file(source_name: &str, message: impl Into<String>) -> Self {
        ParseError {
            source_name: source_name.to_string(),
            line: None,
            message: message.into(),
        }
    }

    fn render(&self) -> impl fmt::Display + '_ {
        struct Rendered<'a>(&'a ParseError);
        impl fmt::Display for Rendered<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0.line {
                    Some(line) => write!(f, "{}:{}: {}", self.0.source_name, line, self.0.message),
                    None => write!(f, "{}: {}", self.0.source_name, self.0.message),
                }
            }
        }
        Rendered(self)
    }
}

/// 1-based line number of a byte offset in `text`, for turning parser spans into locations.
pub(crate) fn line_of_offset(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    // Count on bytes: '\n' never occurs inside a multi-byte UTF-8 sequence, so an offset
    // that is not a char boundary still yields the right line.
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_with_and_without_line() {
        let e = ParseError::at_line("up.trace", 7, "bad");
        assert_eq!(e.to_string(), "up.trace:7: bad");
        let e = ParseError::whole_file("up.trace", "empty");
        assert_eq!(e.to_string(), "up.trace: empty");
    }

    #[test]
    fn line_of_offset_counts_newlines() {
        let text = "a\nbb\n\nccc";
        assert_eq!(line_of_offset(text, 0), 1);
        assert_eq!(line_of_offset(text, 2), 2);
        assert_eq!(line_of_offset(text, 5), 3);
        assert_eq!(line_of_offset(text, 6), 4);
        assert_eq!(line_of_offset(text, 1000), 4);
    }
}

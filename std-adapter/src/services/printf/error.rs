//! Why a printf message stops, and the marker printed where it did.

use std::fmt;

/// Why a printf message cannot be printed (the reply is then -1). Offsets are byte offsets into
/// the format string of the `%` that starts the offending conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintfError {
    /// The message has no control word.
    EmptyMessage,
    /// The control word has bits other than bit 0 set.
    ControlBits {
        /// The control word.
        control: u64,
    },
    /// No NUL ends the format string within the message.
    UnterminatedFormat,
    /// The format string ends inside a conversion specification.
    IncompleteSpec {
        /// Where the specification starts.
        offset: usize,
    },
    /// A conversion character this formatter does not know (or does not support).
    BadConversion {
        /// Where the specification starts.
        offset: usize,
        /// The conversion character.
        byte: u8,
    },
    /// The message ends before an argument this conversion needs.
    MissingArgument {
        /// Where the specification starts.
        offset: usize,
    },
    /// No NUL ends a `%s` argument within the message.
    UnterminatedString {
        /// Where the specification starts.
        offset: usize,
    },
    /// A width or precision above the limit.
    FieldTooLarge {
        /// Where the specification starts.
        offset: usize,
        /// The limit ([`PrintfLimits::max_field`](super::PrintfLimits::max_field)).
        limit: usize,
    },
    /// `%ls`, or `%lc` of a value outside ASCII: wide characters are not supported.
    WideCharacter {
        /// Where the specification starts.
        offset: usize,
    },
}

impl fmt::Display for PrintfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyMessage => f.write_str("printf message without a control word"),
            Self::ControlBits { control } => write!(f, "printf control word {control:#x} has unknown bits"),
            Self::UnterminatedFormat => f.write_str("printf format string without a NUL"),
            Self::IncompleteSpec { offset } => write!(f, "format ends inside the conversion at {offset}"),
            Self::BadConversion { offset, byte } => {
                write!(f, "unsupported conversion {:?} at {offset}", char::from(*byte))
            }
            Self::MissingArgument { offset } => write!(f, "no argument left for the conversion at {offset}"),
            Self::UnterminatedString { offset } => {
                write!(f, "%s argument of the conversion at {offset} has no NUL")
            }
            Self::FieldTooLarge { offset, limit } => {
                write!(f, "width or precision above {limit} in the conversion at {offset}")
            }
            Self::WideCharacter { offset } => {
                write!(f, "wide character conversion at {offset} not supported")
            }
        }
    }
}

impl std::error::Error for PrintfError {}

impl PrintfError {
    /// Whether the message has no format string to print from (no control word, unknown control
    /// bits, no NUL): such a message prints nothing and is answered with -1. Any other error
    /// stops printing at the conversion it names ([`format_partial`](super::format_partial)).
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::EmptyMessage | Self::ControlBits { .. } | Self::UnterminatedFormat)
    }

    /// The short marker printed where a message stopped, naming the problem.
    ///
    /// ```
    /// use hostcall::services::printf::PrintfError;
    /// assert_eq!(PrintfError::BadConversion { offset: 3, byte: b'y' }.marker(), "<hostcall: bad conversion %y>");
    /// assert_eq!(PrintfError::MissingArgument { offset: 0 }.marker(), "<hostcall: missing argument>");
    /// ```
    pub fn marker(&self) -> String {
        let problem = match self {
            Self::BadConversion { byte, .. } => {
                format!("bad conversion %{}", char::from(*byte).escape_default())
            }
            Self::MissingArgument { .. } => "missing argument".into(),
            Self::IncompleteSpec { .. } => "incomplete conversion".into(),
            Self::UnterminatedString { .. } => "unterminated %s argument".into(),
            Self::FieldTooLarge { limit, .. } => format!("width or precision above {limit}"),
            Self::WideCharacter { .. } => "wide characters not supported".into(),
            Self::EmptyMessage => "empty message".into(),
            Self::ControlBits { .. } => "bad control word".into(),
            Self::UnterminatedFormat => "unterminated format".into(),
        };
        format!("<hostcall: {problem}>")
    }
}

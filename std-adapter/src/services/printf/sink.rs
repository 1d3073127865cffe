//! The PRINTF service: control word, output streams, reply.

use super::{format_partial_nulls, format_with, PrintfError, PrintfLimits};
use crate::observe::Reason;
use crate::rate_limit::warn_limited;
use crate::services::message::MessageService;
use hostcall_core::ErrorCode;
use std::io::{self, Write};

/// Where a message prints (control word bit 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stream {
    /// Bit 0 clear.
    Stdout,
    /// Bit 0 set.
    Stderr,
}

/// Where the PRINTF service writes. Each message is written with one call, so messages of
/// different lanes never interleave within a line. An LLVM-RPC console write (`puts`, `fputs`,
/// `fwrite` to stdout or stderr) hands a packet's lanes to a stream in one call, their messages
/// whole and in lane order.
pub trait PrintfSink {
    /// Writes one message's whole output (or several whole messages) to `stream`.
    fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> io::Result<()>;
}

impl<S: PrintfSink + ?Sized> PrintfSink for &mut S {
    fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> io::Result<()> {
        (**self).write_stream(stream, bytes)
    }
}

/// The process's stdout and stderr (each write locks the stream and flushes).
#[derive(Clone, Copy, Debug, Default)]
pub struct StdStreams;

impl PrintfSink for StdStreams {
    fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> io::Result<()> {
        match stream {
            Stream::Stdout => write_flush(&mut io::stdout().lock(), bytes),
            Stream::Stderr => write_flush(&mut io::stderr().lock(), bytes),
        }
    }
}

fn write_flush(w: &mut dyn Write, bytes: &[u8]) -> io::Result<()> {
    w.write_all(bytes)?;
    w.flush()
}

/// Any two writers as stdout and stderr (`Streams { stdout: Vec::new(), stderr: Vec::new() }`
/// captures output in tests).
#[derive(Clone, Debug, Default)]
pub struct Streams<O, E> {
    /// Receives stdout messages.
    pub stdout: O,
    /// Receives stderr messages.
    pub stderr: E,
}

impl<O: Write, E: Write> PrintfSink for Streams<O, E> {
    fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> io::Result<()> {
        match stream {
            Stream::Stdout => write_flush(&mut self.stdout, bytes),
            Stream::Stderr => write_flush(&mut self.stderr, bytes),
        }
    }
}

/// Decodes a complete printf message (control word first) into its stream and output bytes,
/// strictly: any error prints nothing (the service itself uses [`printf_partial`]).
pub fn printf_message(message: &[u64], limits: &PrintfLimits) -> Result<(Stream, Vec<u8>), PrintfError> {
    let (&control, rest) = message.split_first().ok_or(PrintfError::EmptyMessage)?;
    let stream = match control {
        0 => Stream::Stdout,
        1 => Stream::Stderr,
        _ => return Err(PrintfError::ControlBits { control }),
    };
    let mut out = Vec::new();
    format_with(rest, limits, &mut out)?;
    Ok((stream, out))
}

/// A printf message as the service prints it: everything up to where it stopped, and the marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrintedMessage {
    /// Where it goes.
    pub stream: Stream,
    /// The bytes to write: the message up to where it stopped, then the marker if it stopped.
    pub bytes: Vec<u8>,
    /// The message's bytes among them (the reply), the marker not counted.
    pub printed: usize,
    /// Why it stopped early, if it did.
    pub stopped: Option<PrintfError>,
}

/// Decodes a complete printf message as the service prints it ([`super::format_partial`]): up to
/// the first conversion it cannot print, then that problem's [marker](PrintfError::marker). `Err`
/// only for a message without a format string ([`PrintfError::is_fatal`]).
///
/// ```
/// use hostcall::services::printf::{printf_partial, PrintfLimits, PrintfMessage};
/// let message = PrintfMessage::new(b"%d and %d\n").int(1).into_words();
/// let printed = printf_partial(&message, &PrintfLimits::default()).unwrap();
/// assert_eq!(printed.bytes, b"1 and <hostcall: missing argument>");
/// assert_eq!(printed.printed, 6);
/// ```
pub fn printf_partial(message: &[u64], limits: &PrintfLimits) -> Result<PrintedMessage, PrintfError> {
    let (&control, rest) = message.split_first().ok_or(PrintfError::EmptyMessage)?;
    let stream = match control {
        0 => Stream::Stdout,
        1 => Stream::Stderr,
        _ => return Err(PrintfError::ControlBits { control }),
    };
    let mut bytes = Vec::new();
    match format_marked(rest, &[], limits, &mut bytes) {
        (_, Some(error)) if error.is_fatal() => Err(error),
        (printed, stopped) => Ok(PrintedMessage { stream, bytes, printed, stopped }),
    }
}

/// A message without its control word as the service prints it ([`format_partial_nulls`]):
/// where it stopped, the stop is counted and logged (rate-limited) and its marker appended, not
/// counted. Returns the bytes printed before the marker and why it stopped; a message without a
/// format string appends nothing. Every transport's printf prints through here.
pub(crate) fn format_marked(
    words: &[u64],
    null_strings: &[bool],
    limits: &PrintfLimits,
    out: &mut Vec<u8>,
) -> (usize, Option<PrintfError>) {
    let (printed, stopped) = format_partial_nulls(words, null_strings, limits, out);
    if let Some(error) = stopped.filter(|error| !error.is_fatal()) {
        crate::observe::count(Reason::BadRequest);
        warn_limited!("printf: message stopped after {printed} bytes: {error}");
        out.extend_from_slice(error.marker().as_bytes());
    }
    (printed, stopped)
}

/// The PRINTF service on one complete message, with default limits: prints it to `sink` and
/// answers `[bytes printed, 0]`. A message that cannot be printed whole prints up to the
/// conversion that stops it and a marker, and answers the count before the marker (as ROCm's host
/// does, [`printf_partial`]). A message without a format string prints nothing and answers
/// `ErrorCode::BadRequest.reply()`, a failed write `ErrorCode::Refused.reply()`; both have
/// `u64::MAX` (-1, printf's error return) in word 0.
///
/// ```
/// use hostcall::services::printf::{printf_reply, PrintfMessage, Streams};
/// let mut sink = Streams { stdout: Vec::new(), stderr: Vec::new() };
/// let message = PrintfMessage::new(b"%s %d\n").to_stderr().string(b"lane").int(7).into_words();
/// assert_eq!(printf_reply(&message, &mut sink), [7, 0]);
/// assert_eq!(sink.stderr, b"lane 7\n");
/// let bad = PrintfMessage::new(b"x").control(2).into_words();
/// assert_eq!(printf_reply(&bad, &mut sink)[0] as i64, -1);
/// ```
pub fn printf_reply(message: &[u64], sink: &mut dyn PrintfSink) -> [u64; 2] {
    printf_reply_with(message, &PrintfLimits::default(), sink)
}

/// [`printf_reply`] with explicit limits.
pub fn printf_reply_with(message: &[u64], limits: &PrintfLimits, sink: &mut dyn PrintfSink) -> [u64; 2] {
    match printf_partial(message, limits) {
        Ok(PrintedMessage { stream, bytes, printed, .. }) => match sink.write_stream(stream, &bytes) {
            Ok(()) => [printed as u64, 0],
            Err(_) => ErrorCode::Refused.reply(),
        },
        Err(_) => {
            crate::observe::count(Reason::BadRequest);
            ErrorCode::BadRequest.reply()
        }
    }
}

/// A complete PRINTF lane service: message assembly (default limits) around [`printf_reply`]
/// writing to `sink`. Register it for [`hostcall_core::PRINTF`].
pub fn printf_service<S: PrintfSink>(mut sink: S) -> MessageService<impl FnMut(&[u64]) -> [u64; 2]> {
    MessageService::new(move |message: &[u64]| printf_reply(message, &mut sink))
}

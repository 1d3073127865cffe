//! The examples' command-line parsing, shared by `waves`, `bench` and `cuda_waves` (each includes
//! this file with `#[path]`): [`lexopt`] underneath, and the rules all three keep:
//!
//! - `--help` (or `-h`) prints the usage on stdout and exits 0;
//! - a bad flag or value is named on stderr, followed by the usage, and exits 2;
//! - every number is checked against its range, never wrapped, clamped or truncated.
//!
//! The parsers return `Result<Command<Options>, String>` so that tests can call them on argument
//! lists; [`run_or_exit`] turns that into the behaviour above.
#![allow(dead_code)] // each example uses part of it

use std::ffi::OsString;
use std::fmt::Display;
use std::io::Write;
use std::ops::RangeInclusive;
use std::str::FromStr;

pub(crate) use lexopt::{Arg, Parser};

pub(crate) mod progress;

/// What a command line asks for.
#[derive(Debug)]
pub(crate) enum Command<T> {
    /// Run with these options.
    Run(T),
    /// Print the usage.
    Help,
}

/// A parser over `args` (without the program name); `Parser::from_env()` for the real ones.
pub(crate) fn parser<I: IntoIterator<Item = S>, S: Into<OsString>>(args: I) -> Parser {
    Parser::from_args(args)
}

/// The value of `flag`, as UTF-8.
pub(crate) fn string(parser: &mut Parser, flag: &str) -> Result<String, String> {
    let value = parser.value().map_err(|e| format!("{flag}: {e}"))?;
    value.into_string().map_err(|v| format!("{flag}: {v:?} is not valid UTF-8"))
}

/// The value of `flag` as a number in `range`.
pub(crate) fn number<T>(parser: &mut Parser, flag: &str, range: RangeInclusive<T>) -> Result<T, String>
where
    T: FromStr + PartialOrd + Display,
{
    let value = string(parser, flag)?;
    parse_number(flag, &value, &range)
}

/// The value of `flag` as a comma-separated list of numbers in `range`, at least one.
pub(crate) fn list<T>(parser: &mut Parser, flag: &str, range: RangeInclusive<T>) -> Result<Vec<T>, String>
where
    T: FromStr + PartialOrd + Display,
{
    let value = string(parser, flag)?;
    value.split(',').map(|item| parse_number(flag, item, &range)).collect()
}

/// The value of `flag`, one of `choices` (by name).
pub(crate) fn choice<T: Copy>(parser: &mut Parser, flag: &str, choices: &[(&str, T)]) -> Result<T, String> {
    let value = string(parser, flag)?;
    match choices.iter().find(|(name, _)| *name == value) {
        Some(&(_, choice)) => Ok(choice),
        None => {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            Err(format!("{flag}: '{value}' is not one of {}", names.join(", ")))
        }
    }
}

fn parse_number<T>(flag: &str, value: &str, range: &RangeInclusive<T>) -> Result<T, String>
where
    T: FromStr + PartialOrd + Display,
{
    match value.parse::<T>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!("{flag}: '{value}' is not a number in {}..={}", range.start(), range.end())),
    }
}

/// From now on a write to a closed stdout (`waves | head -1`) ends the process quietly, as it
/// ends `cat` or `yes`: by SIGPIPE, its default action, which the Rust runtime sets to "ignore"
/// (so that every `println!` after the reader left would panic instead).
pub(crate) fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restoring a signal's default action has no precondition; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The error for an argument no parser arm took: names the flag (`--bogus`) or the stray value.
pub(crate) fn unexpected(arg: Arg<'_>) -> String {
    match arg {
        Arg::Long(flag) => format!("unknown flag '--{flag}'"),
        Arg::Short(flag) => format!("unknown flag '-{flag}'"),
        Arg::Value(value) => format!("unexpected argument '{}'", value.to_string_lossy()),
    }
}

/// Options to run with; or the usage on stdout and exit 0 (`--help`); or the error and the usage
/// on stderr and exit 2.
pub(crate) fn run_or_exit<T>(parsed: Result<Command<T>, String>, usage: &str) -> T {
    match parsed {
        Ok(Command::Run(options)) => options,
        Ok(Command::Help) => {
            // Not `println!`: a closed stdout (`--help | head -1`) is no reason to panic.
            let _ = writeln!(std::io::stdout(), "{usage}");
            std::process::exit(0)
        }
        Err(error) => {
            eprintln!("error: {error}\n{usage}");
            std::process::exit(2)
        }
    }
}

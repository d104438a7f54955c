//! A clap usage error in words, from the error's kind and context (the
//! argument, the value, the suggestions), never from its rendered text: the
//! same words clap's own formatter writes, for rlock's one-line message.

use clap::error::{ContextKind, ContextValue, Error, ErrorKind};

/// The error's message and its suggestions (`a similar argument exists: …`),
/// each on one line.
pub(super) fn of(err: &Error) -> (String, Vec<String>) {
    let message = message(err).unwrap_or_else(|| {
        use std::error::Error as _;
        match (err.kind().as_str(), err.source()) {
            (Some(kind), _) => kind.to_owned(),
            (None, Some(source)) => source.to_string(),
            (None, None) => "unknown cause".to_owned(),
        }
    });
    (one_line(&message), tips(err))
}

/// The usage line clap chose for the error (it names the options given when
/// they matter), without its `Usage: ` title.
pub(super) fn usage(err: &Error) -> Option<String> {
    match err.get(ContextKind::Usage) {
        Some(ContextValue::StyledStr(usage)) => Some(untitled(&usage.to_string())),
        _ => None,
    }
}

/// `cmd`'s usage line, without its `Usage: ` title.
pub(super) fn plain_usage(cmd: &mut clap::Command) -> String {
    untitled(&cmd.render_usage().to_string())
}

fn untitled(usage: &str) -> String {
    let first = usage.lines().next().unwrap_or_default().trim();
    first.strip_prefix("Usage: ").unwrap_or(first).to_owned()
}

/// Lines joined as one, as clap would print them one under the other.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn text(err: &Error, kind: ContextKind) -> Option<&str> {
    match err.get(kind) {
        Some(ContextValue::String(text)) => Some(text),
        _ => None,
    }
}

fn number(err: &Error, kind: ContextKind) -> Option<isize> {
    match err.get(kind) {
        Some(ContextValue::Number(n)) => Some(*n),
        _ => None,
    }
}

/// The message of each kind of error; None when the context lacks what it needs.
fn message(err: &Error) -> Option<String> {
    let arg = text(err, ContextKind::InvalidArg);
    let value = text(err, ContextKind::InvalidValue);
    Some(match err.kind() {
        ErrorKind::ArgumentConflict => conflict(err),
        ErrorKind::NoEquals => format!("equal sign is needed when assigning values to '{}'", arg?),
        ErrorKind::InvalidValue if value?.is_empty() => {
            format!("a value is required for '{}' but none was supplied", arg?)
        }
        ErrorKind::InvalidValue => format!(
            "invalid value '{}' for '{}'{}",
            value?,
            arg?,
            listed("possible values", err.get(ContextKind::ValidValue))
        ),
        ErrorKind::InvalidSubcommand => format!(
            "unrecognized subcommand '{}'",
            text(err, ContextKind::InvalidSubcommand)?
        ),
        ErrorKind::MissingRequiredArgument => match err.get(ContextKind::InvalidArg)? {
            ContextValue::Strings(args) => format!(
                "the following required arguments were not provided: {}",
                args.join(" ")
            ),
            _ => return None,
        },
        ErrorKind::MissingSubcommand => format!(
            "'{}' requires a subcommand but one was not provided{}",
            text(err, ContextKind::InvalidSubcommand)?,
            listed("subcommands", err.get(ContextKind::ValidSubcommand))
        ),
        ErrorKind::TooManyValues => format!(
            "unexpected value '{}' for '{}' found; no more were expected",
            value?, arg?
        ),
        ErrorKind::TooFewValues => {
            let given = number(err, ContextKind::ActualNumValues)?;
            format!(
                "{} values required by '{}'; only {given}{}",
                number(err, ContextKind::MinValues)?,
                arg?,
                provided(given)
            )
        }
        ErrorKind::WrongNumberOfValues => {
            let given = number(err, ContextKind::ActualNumValues)?;
            format!(
                "{} values required for '{}' but {given}{}",
                number(err, ContextKind::ExpectedNumValues)?,
                arg?,
                provided(given)
            )
        }
        ErrorKind::ValueValidation => {
            use std::error::Error as _;
            let reason = err.source().map(|s| format!(": {s}")).unwrap_or_default();
            format!("invalid value '{}' for '{}'{reason}", value?, arg?)
        }
        ErrorKind::UnknownArgument => format!("unexpected argument '{}' found", arg?),
        _ => return None,
    })
}

fn provided(n: isize) -> &'static str {
    if n > 1 {
        " were provided"
    } else {
        " was provided"
    }
}

/// `the argument '--a' cannot be used with '--b'` (or with several, or twice).
fn conflict(err: &Error) -> String {
    let mut prior = err.get(ContextKind::PriorArg);
    let mut out = if let Some(arg) = text(err, ContextKind::InvalidArg) {
        if prior == Some(&ContextValue::String(arg.to_owned())) {
            prior = None;
            format!("the argument '{arg}' cannot be used multiple times")
        } else {
            format!("the argument '{arg}' cannot be used with")
        }
    } else if let Some(sub) = text(err, ContextKind::InvalidSubcommand) {
        format!("the subcommand '{sub}' cannot be used with")
    } else {
        ErrorKind::ArgumentConflict
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    match prior {
        Some(ContextValue::Strings(others)) => {
            out.push(':');
            for other in others {
                out.push(' ');
                out.push_str(other);
            }
        }
        Some(ContextValue::String(other)) => out.push_str(&format!(" '{other}'")),
        Some(_) => out.push_str(" one or more of the other specified arguments"),
        None => {}
    }
    out
}

/// ` [possible values: a, b]`, values with blanks quoted, or nothing.
fn listed(name: &str, values: Option<&ContextValue>) -> String {
    let Some(ContextValue::Strings(values)) = values else {
        return String::new();
    };
    if values.is_empty() {
        return String::new();
    }
    let quoted: Vec<String> = values
        .iter()
        .map(|v| {
            if v.is_empty() || v.contains(char::is_whitespace) {
                format!("{v:?}")
            } else {
                v.clone()
            }
        })
        .collect();
    format!(" [{name}: {}]", quoted.join(", "))
}

/// clap's suggestions: similar subcommands, arguments and values, then its
/// other tips, but "to pass '-l' as a value, use '-- -l'": never right for
/// rlock, where only COMMAND takes such words, and it goes after `--`.
fn tips(err: &Error) -> Vec<String> {
    let mut tips: Vec<String> = [
        (ContextKind::SuggestedSubcommand, "subcommand"),
        (ContextKind::SuggestedArg, "argument"),
        (ContextKind::SuggestedValue, "value"),
    ]
    .into_iter()
    .filter_map(|(kind, what)| err.get(kind).map(|found| one_line(&similar(what, found))))
    .collect();
    if let Some(ContextValue::StyledStrs(others)) = err.get(ContextKind::Suggested) {
        tips.extend(
            others
                .iter()
                .map(|tip| one_line(&tip.to_string()))
                .filter(|tip| !tip.starts_with("to pass ")),
        );
    }
    tips
}

/// `a similar argument exists: '--wait'`, or `some similar … exist: …`.
fn similar(what: &str, found: &ContextValue) -> String {
    let quote = |s: &String| format!("'{s}'");
    match found {
        ContextValue::String(one) => format!("a similar {what} exists: {}", quote(one)),
        ContextValue::Strings(some) if some.len() == 1 => {
            format!("a similar {what} exists: {}", quote(&some[0]))
        }
        ContextValue::Strings(some) => format!(
            "some similar {what}s exist: {}",
            some.iter().map(quote).collect::<Vec<_>>().join(", ")
        ),
        _ => String::new(),
    }
}

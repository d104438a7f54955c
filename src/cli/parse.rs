//! Parsing the command line: help and version printed as clap prints them, a
//! usage error as one `rlock:` line with clap's suggestions, the
//! subcommand's usage and where its help is (exit 2).

use std::ffi::OsString;

use clap::{CommandFactory, FromArgMatches, Parser};

use super::{command, env, Cli, Command, WhilePidCli, WHILE_PID};
use crate::exit::Exit;

/// Parses the command line. Help and version are printed here (exit 0); a usage
/// error becomes one `rlock: ` line (exit 2).
pub fn parse() -> Result<Cli, Exit> {
    parse_from(std::env::args_os())
}

/// [`parse`] for a given argument list.
pub fn parse_from<I, T>(args: I) -> Result<Cli, Exit>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|a| a == WHILE_PID) {
        let rest = std::iter::once(OsString::from("rlock")).chain(args[2..].iter().cloned());
        return WhilePidCli::try_parse_from(rest)
            .map(|w| Cli {
                global: w.global,
                command: Command::WhilePid(w.args),
            })
            .map_err(|err| {
                let at = Context {
                    sub: None,
                    dashes: false,
                };
                crate::report::error(&one_line(&err.render().to_string(), &at));
                Exit::Usage
            });
    }
    let at = Context::of(&args);
    let parsed = command()
        .try_get_matches_from(args)
        .and_then(|matches| {
            refuse_empty_url(&matches)?;
            let overridden = env::overridden(&matches)?;
            Cli::from_arg_matches(&matches).map(|cli| (cli, overridden))
        })
        .map(|(mut cli, overridden)| {
            env::drop_overridden(&mut cli.command, &overridden);
            if let Command::Run(run) = &mut cli.command {
                run.resolve_shell();
            }
            cli
        });
    parsed.map_err(|err| {
        use clap::error::ErrorKind;
        match err.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                let _ = err.print();
                Exit::Success
            }
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                let _ = err.print();
                Exit::Usage
            }
            _ => {
                crate::report::error(&one_line(&err.render().to_string(), &at));
                Exit::Usage
            }
        }
    })
}

/// An empty `--url` (`--url "$UNSET"`) is a mistake, not a request for the
/// default; an empty RLOCK_URL counts as unset, like an empty REDIS_URL.
fn refuse_empty_url(matches: &clap::ArgMatches) -> Result<(), clap::Error> {
    let from_command_line =
        matches.value_source("urls") == Some(clap::parser::ValueSource::CommandLine);
    let empty = matches
        .get_many::<String>("urls")
        .is_some_and(|mut urls| urls.any(|u| u.trim().is_empty()));
    if from_command_line && empty {
        return Err(command().error(
            clap::error::ErrorKind::InvalidValue,
            "invalid value '' for '--url <URL>': empty URL",
        ));
    }
    Ok(())
}

/// Where a usage error was made: the subcommand named on the command line
/// (before any `--`), and whether `--` was given.
struct Context {
    sub: Option<String>,
    dashes: bool,
}

impl Context {
    fn of(args: &[OsString]) -> Self {
        let names: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        let before: Vec<&OsString> = args.iter().skip(1).take_while(|a| *a != "--").collect();
        Context {
            sub: before
                .iter()
                .find_map(|a| names.iter().find(|n| *a == n.as_str()).cloned()),
            dashes: before.len() + 1 < args.len(),
        }
    }
}

/// clap renders several lines (`error: …`, usage, tips); keep them on one
/// line: the message, clap's suggestions, the usage of the subcommand, and
/// where its help is.
fn one_line(rendered: &str, at: &Context) -> String {
    let mut parts = Vec::new();
    let mut tips = Vec::new();
    let mut usage = None;
    for line in rendered.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("Usage: ") {
            usage = Some(text.to_owned());
            break;
        }
        if line.starts_with("For more information") {
            break;
        }
        if let Some(tip) = line.strip_prefix("tip: ") {
            // "to pass '-l' as a value, use '-- -l'": never right for rlock,
            // where only COMMAND takes such words, and it goes after `--`.
            if !tip.starts_with("to pass ") {
                tips.push(tip);
            }
        } else if !line.is_empty() {
            parts.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    let mut text = parts.join(" ");
    for tip in tips {
        text.push_str("; ");
        text.push_str(tip);
    }
    // `rlock run demo ./backup.sh` or `rlock run demo ls -l`: the command was
    // taken for another NAME, or its options for rlock's.
    let run = at.sub.as_deref() == Some("run");
    if text.contains("<COMMAND>") || (run && !at.dashes && text.contains("unexpected argument")) {
        text.push_str("; COMMAND goes after --: rlock run NAME -- COMMAND [ARGS...], or rlock run NAME -c 'STRING'");
    }
    if let Some(usage) = usage {
        text.push_str("; usage: ");
        text.push_str(&usage);
    }
    let help = match &at.sub {
        Some(sub) => format!("rlock {sub} --help"),
        None => "rlock --help".to_owned(),
    };
    format!("{text} (see '{help}')")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_rejected() {
        for args in [
            &["rlock", "run", "x"][..],
            &["rlock", "run", "x", "--"],
            &["rlock", "run", "--", "true"],
            &["rlock", "run", "--wait", "soon", "x", "--", "true"],
            &["rlock", "run", "--ttl", "0s", "x", "--", "true"],
            &[
                "rlock", "run", "--ttl", "1s", "--lease", "1s", "x", "--", "true",
            ],
            &["rlock", "run", "-n", "--wait", "1s", "x", "--", "true"],
            &["rlock", "--connect-timeout", "0s", "run", "x", "--", "true"],
            &["rlock", "run", "--ttl", "2y", "x", "--", "true"],
            &["rlock", "run", "--kill-after", "100y", "x", "--", "true"],
        ] {
            assert!(parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn usage_errors_fit_on_one_line() {
        let args: Vec<OsString> = ["rlock", "run", "x"].map(OsString::from).to_vec();
        let err = Cli::try_parse_from(&args).unwrap_err();
        let line = one_line(&err.render().to_string(), &Context::of(&args));
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("COMMAND"), "{line}");
        assert!(line.ends_with("(see 'rlock run --help')"), "{line}");
    }
}

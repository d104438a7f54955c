//! Parsing the command line: help and version printed as clap prints them, a
//! usage error as one `rlock:` line with clap's suggestions, the
//! subcommand's usage and where its help is (exit 2).

use std::ffi::OsString;

use clap::{FromArgMatches, Parser};

use super::context::Context;
use super::duration::{bare_number, is_unit, unit_words};
use super::words;
use super::{Cli, Command, WHILE_PID, WhilePidCli, command, env, run_command};
use crate::exit::Exit;
use crate::lock::name::{InvalidName, LockName};

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
                crate::report::error(&one_line_of(&Usage::Clap(err), &Context::default()));
                Exit::Usage
            });
    }
    // (The command line is looked at word by word only when it matters: a
    // second `--`, a number followed by a unit, or an error to explain.
    // Building clap's definition twice would cost every run.)
    if let Some(stray) = maybe_stray_unit(&args) {
        crate::report::error(&stray);
        return Err(Exit::Usage);
    }
    with_clap(args)
}

/// [`parse_from`] by clap, for any line: `args` has passed the checks
/// before it.
fn with_clap(args: Vec<OsString>) -> Result<Cli, Exit> {
    let given = args.clone();
    let (args, dashed) = match args.iter().filter(|a| *a == "--").count() {
        2.. => match dashed_names(&args, &Context::of(&args)) {
            Some((rewritten, names)) => (rewritten, names),
            None => (args, Vec::new()),
        },
        _ => (args, Vec::new()),
    };
    let understood = |matches: clap::ArgMatches| {
        refuse_empty_values(&matches)?;
        let overridden = env::overridden(&matches).map_err(|message| Usage::Own {
            message,
            usage: None,
        })?;
        let from_option =
            matches.value_source("urls") == Some(clap::parser::ValueSource::CommandLine);
        let mut cli = Cli::from_arg_matches(&matches).map_err(Usage::Clap)?;
        cli.global.urls_from_option = from_option;
        cli.global.password_command = cli.global.password_command.filter(|c| !c.trim().is_empty());
        env::drop_overridden(&mut cli.command, &overridden);
        if let Command::Run(run) = &mut cli.command {
            run.resolve_shell();
        }
        Ok(cli)
    };
    let as_run = args.iter().skip(1).any(|a| a == "run");
    let parsed = as_run
        .then(|| {
            run_command()
                .try_get_matches_from(&args)
                .map_err(Usage::Clap)
                .and_then(understood)
                .ok()
        })
        .flatten()
        .map_or_else(
            || {
                command()
                    .try_get_matches_from(&args)
                    .map_err(Usage::Clap)
                    .and_then(understood)
            },
            Ok,
        );
    let mut cli = parsed.map_err(|usage| refused(&usage, &given))?;
    if let Command::Run(run) = &mut cli.command {
        for name in &mut run.names {
            let index = name
                .strip_prefix(PLACEHOLDER)
                .and_then(|i| i.parse::<usize>().ok());
            if let Some(given) = index.and_then(|i| dashed.get(i)) {
                *name = LockName::new(given).map_err(|bad| {
                    crate::report::error(&bad.to_string());
                    Exit::Usage
                })?;
            }
        }
    }
    Ok(cli)
}

/// What a line clap did not take ends with: help or the version printed
/// (0), help for a line that names no subcommand (2), or one usage line (2).
fn refused(usage: &Usage, given: &[OsString]) -> Exit {
    use clap::error::ErrorKind;
    match usage {
        Usage::Clap(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            let _ = err.print();
            Exit::Success
        }
        Usage::Clap(err) if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            Exit::Usage
        }
        _ => {
            crate::report::error(&one_line_of(usage, &Context::of(given)));
            Exit::Usage
        }
    }
}

/// A usage error: clap's, or one of rlock's own checks on what clap
/// accepted, said in rlock's words with the usage line, if any, to show.
enum Usage {
    Clap(clap::Error),
    Own {
        message: String,
        usage: Option<String>,
    },
}

/// The one line for a usage error: a refused NAME in the name check's own
/// words (`invalid lock name …`, the same whichever command took it), anything
/// else with clap's suggestions, the subcommand's usage and where its help is.
fn one_line_of(usage: &Usage, at: &Context) -> String {
    use std::error::Error as _;
    match usage {
        Usage::Clap(err) => match err.source().and_then(|s| s.downcast_ref::<InvalidName>()) {
            Some(bad) => bad.to_string(),
            None => {
                let (message, mut tips) = words::of(err);
                // `rlock deploy-prod -- ./deploy.sh`: `run` forgotten (no
                // subcommand looks like the word).
                if err.kind() == clap::error::ErrorKind::InvalidSubcommand && tips.is_empty() {
                    tips.extend(
                        at.not_sub
                            .as_ref()
                            .and_then(|(word, after)| super::context::run_meant(word, after)),
                    );
                }
                one_line(&message, &tips, words::usage(err), at)
            }
        },
        Usage::Own { message, usage } => one_line(message, &[], usage.clone(), at),
    }
}

/// An empty `--url` or `--password-command` (`--url "$UNSET"`) is a mistake,
/// not a request for the default; an empty RLOCK_URL or
/// RLOCK_PASSWORD_COMMAND counts as unset, like an empty REDIS_URL.
fn refuse_empty_values(matches: &clap::ArgMatches) -> Result<(), Usage> {
    for (id, option, what) in [
        ("urls", "--url <URL>", "empty URL"),
        (
            "password_command",
            "--password-command <CMD>",
            "empty command",
        ),
    ] {
        let from_command_line =
            matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        let empty = matches
            .get_many::<String>(id)
            .is_some_and(|mut values| values.any(|v| v.trim().is_empty()));
        if from_command_line && empty {
            return Err(Usage::Own {
                message: format!("invalid value '' for '{option}': {what}"),
                usage: Some(words::plain_usage(&mut command())),
            });
        }
    }
    Ok(())
}

/// `rlock run --wait 10 m demo -- ...`: a unit meant for the duration
/// would silently become a second lock, and a lock really named `m` would
/// silently wait 10 minutes if the words were joined. Refused with both
/// spellings (the message of the usage error), before anything is locked.
fn maybe_stray_unit(args: &[OsString]) -> Option<String> {
    let words: Vec<String> = args
        .iter()
        .take_while(|a| *a != "--")
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let suspect = words
        .windows(2)
        .any(|w| bare_number(&w[0]) && is_unit(&w[1]));
    if !suspect {
        return None;
    }
    let at = Context::of(args);
    let (flag, number, unit) = at.stray?;
    let help = format!("rlock {} --help", at.sub.as_deref().unwrap_or("run"));
    let meant = unit_words(&unit, &number);
    Some(format!(
        "'{unit}' after {flag} {number} is a NAME or a unit: lock named '{unit}'? write {flag} {number}s {unit}; \
         {number} {meant}? write {flag} {number}{unit} (see '{help}')"
    ))
}

/// `rlock run [OPTIONS] -- -x -- COMMAND`: NAMEs that begin with `-` go
/// between two `--`, as `acquire -- -x` takes one after `--`. Such NAMEs
/// stand in for clap as placeholders, put back after parsing.
fn dashed_names(args: &[OsString], at: &Context) -> Option<(Vec<OsString>, Vec<String>)> {
    let [first, second, ..] = at.dashes_at[..] else {
        return None;
    };
    if at.sub.as_deref() != Some("run") || !at.positional.is_empty() || second <= first + 1 {
        return None;
    }
    let names: Vec<String> = args[first + 1..second]
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if !names.iter().any(|n| n.starts_with('-')) {
        return None;
    }
    let mut rewritten: Vec<OsString> = args[..first].to_vec();
    rewritten.extend((0..names.len()).map(|i| OsString::from(format!("{PLACEHOLDER}{i}"))));
    rewritten.extend(args[second..].iter().cloned());
    Some((rewritten, names))
}

/// What stands in for a NAME that begins with `-` while clap parses.
const PLACEHOLDER: &str = "rlock-dashed-name-";

/// The usage error on one line: clap's message, its suggestions, the usage
/// of the subcommand (else `usage`, clap's for the error), and where its help is.
fn one_line(message: &str, tips: &[String], usage: Option<String>, at: &Context) -> String {
    let mut text = message.to_owned();
    for tip in tips {
        text.push_str("; ");
        text.push_str(tip);
    }
    // `rlock run demo ./backup.sh` or `rlock run demo ls -l`: the command was
    // taken for another NAME, or its options for rlock's.
    let run = at.sub.as_deref() == Some("run");
    let dashes = !at.dashes_at.is_empty();
    if text.contains("<COMMAND>") || (run && !dashes && text.contains("unexpected argument")) {
        text.push_str("; COMMAND goes after --: rlock run NAME -- COMMAND [ARGS...], or rlock run NAME -c 'STRING'");
    }
    if let Some(usage) = at.usage.clone().or(usage) {
        text.push_str("; usage: ");
        text.push_str(&usage);
    }
    let help = match &at.sub {
        Some(sub) => format!("rlock {sub} --help"),
        None => "rlock --help".to_owned(),
    };
    match at.lock() {
        Some(lock) => format!("{lock}: {text} (see '{help}')"),
        None => format!("{text} (see '{help}')"),
    }
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
    fn a_refused_name_reads_the_same_whichever_command_took_it() {
        for args in [
            &["rlock", "run", "a b", "--", "true"][..],
            &["rlock", "run", "ok", "a b", "--", "true"],
            &["rlock", "acquire", "a b"],
            &["rlock", "renew", "a b"],
            &["rlock", "release", "--force", "a b"],
            &["rlock", "status", "ok", "a b"],
            &["rlock", "history", "a b"],
        ] {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            let err = command().try_get_matches_from(&args).unwrap_err();
            assert_eq!(
                one_line_of(&Usage::Clap(err), &Context::of(&args)),
                "invalid lock name 'a b': whitespace is not allowed",
                "{args:?}"
            );
        }
        let dashed = ["rlock", "run", "--", "-a b", "--", "true"];
        assert!(matches!(parse_from(dashed), Err(Exit::Usage)));
        let dashed = ["rlock", "run", "--", "-a", "--", "true"];
        let Command::Run(run) = parse_from(dashed).unwrap().command else {
            panic!("not run")
        };
        assert_eq!(run.names[0].as_str(), "-a");
    }

    /// A value each option of `run` (and each global one) accepts.
    fn sample(arg: &clap::Arg) -> Vec<String> {
        let name = arg
            .get_value_names()
            .and_then(|n| n.first().map(ToString::to_string))
            .unwrap_or_default();
        let values: &[&str] = match name.as_str() {
            "DUR" => &["5s", "0", "1.5", "0s", "10 m", "soon"],
            "N" => &["3", "0", "-1", "x"],
            "URL" => &["redis://h:1", "redis://a,redis://b", "file:/tmp/d", ""],
            "FILE" => &["/tmp/f"],
            "P" => &["pfx", ""],
            "TEXT" => &["a note"],
            "STRING" => &["echo hi"],
            _ => &["v"],
        };
        values.iter().map(ToString::to_string).collect()
    }

    /// Every spelling of `arg` with each sample value: `--long V`,
    /// `--long=V`, `-s V`, `-sV` (a flag alone).
    fn spellings(arg: &clap::Arg) -> Vec<Vec<String>> {
        let mut flags: Vec<String> = arg
            .get_long_and_visible_aliases()
            .unwrap_or_default()
            .into_iter()
            .chain(arg.get_all_aliases().unwrap_or_default())
            .map(|l| format!("--{l}"))
            .collect();
        flags.extend(arg.get_short().map(|s| format!("-{s}")));
        if !arg.get_action().takes_values() {
            return flags.into_iter().map(|f| vec![f]).collect();
        }
        let mut out = Vec::new();
        for flag in flags {
            for value in sample(arg) {
                out.push(vec![flag.clone(), value.clone()]);
                if flag.starts_with("--") {
                    out.push(vec![format!("{flag}={value}")]);
                } else {
                    out.push(vec![format!("{flag}{value}")]);
                }
            }
        }
        out
    }

    fn both(args: &[String]) {
        let mut argv = vec!["rlock".to_owned()];
        argv.extend(args.iter().cloned());
        let full = command()
            .try_get_matches_from(&argv)
            .map(|m| Cli::from_arg_matches(&m).map(|c| format!("{c:?}")));
        let fast = run_command()
            .try_get_matches_from(&argv)
            .map(|m| Cli::from_arg_matches(&m).map(|c| format!("{c:?}")));
        if let Ok(Ok(fast)) = fast {
            let Ok(Ok(full)) = full else {
                panic!("run's own definition accepts what the whole refuses: {argv:?}")
            };
            assert_eq!(fast, full, "{argv:?}");
        }
    }

    #[test]
    fn runs_parse_the_same_with_runs_definition_alone() {
        let mut whole = command();
        whole.build();
        let run = whole.find_subcommand("run").unwrap();
        let options: Vec<Vec<Vec<String>>> = run
            .get_arguments()
            .filter(|a| !a.is_positional())
            .map(spellings)
            .collect();
        let tails: [&[&str]; 5] = [
            &["x", "--", "true"],
            &["x", "y", "--", "sh", "-c", "exit 3"],
            &["x"],
            &["--", "true"],
            &["x", "--", "true", "--", "-n"],
        ];
        let with = |words: &[&Vec<String>], tail: &[&str], before: bool| {
            let mut line: Vec<String> = Vec::new();
            let opts = words.iter().flat_map(|w| w.iter().cloned());
            if before {
                line.extend(opts);
                line.push("run".into());
            } else {
                line.push("run".into());
                line.extend(opts);
            }
            line.extend(tail.iter().map(ToString::to_string));
            line
        };
        let mut lines = 0;
        for tail in tails {
            both(&with(&[], tail, false));
            for spelling in options.iter().flatten() {
                both(&with(&[spelling], tail, false));
                both(&with(&[spelling], tail, true));
                lines += 2;
            }
        }
        // Two options together: conflicts and overrides.
        let firsts: Vec<&Vec<String>> = options.iter().filter_map(|o| o.first()).collect();
        for a in &firsts {
            for b in &firsts {
                both(&with(&[a, b], tails[0], false));
                lines += 1;
            }
        }
        for words in [
            &["run", "-c", "echo", "x"][..],
            &["run", "-c", "echo", "x", "--", "true"],
            &["run", "-nv", "x", "--", "true"],
            &["run", "-w5", "x", "--", "true"],
            &["run", "x", "-q", "--", "true"],
            &["-q", "run", "-v", "x", "--", "true"],
            &["run", "run", "--", "true"],
            &["status", "run"],
            &["--prefix", "run", "status"],
            &["run", "--help"],
            &["run", "-V"],
            &["help", "run"],
        ] {
            both(&words.iter().map(ToString::to_string).collect::<Vec<_>>());
        }
        assert!(lines > 500, "{lines} command lines");
    }

    #[test]
    fn usage_errors_fit_on_one_line() {
        let args: Vec<OsString> = ["rlock", "run", "x"].map(OsString::from).to_vec();
        let err = Cli::try_parse_from(&args).unwrap_err();
        let line = one_line_of(&Usage::Clap(err), &Context::of(&args));
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("COMMAND"), "{line}");
        assert!(line.ends_with("(see 'rlock run --help')"), "{line}");
    }
}

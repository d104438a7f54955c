//! The words of a command line as far as a usage error needs them (which
//! subcommand, which NAME, where the `--`s are), told apart with the
//! definition's own options: only on the way to a usage error, for a suspect
//! unit (`--wait 10 m`) or for a line with a second `--`.

use std::ffi::OsString;

use super::duration::{bare_number, is_unit};
use super::{command, words};
use crate::lock::name::LockName;

/// What the words of a command line are, as far as a usage error needs to
/// know: the subcommand, the words given as its positional arguments before
/// the first `--` (NAMEs), and where the `--`s are.
#[derive(Default)]
pub(super) struct Context {
    pub(super) sub: Option<String>,
    /// An option the subcommand does not know came before its first NAME:
    /// whether the next word was its value cannot be told, so no word is
    /// named as the lock.
    pub(super) unsure: bool,
    /// A duration option, its bare-number value and the unit word that
    /// follows it (`--wait`, `10`, `m`).
    pub(super) stray: Option<(String, String, String)>,
    /// The subcommand's words before the first `--` that are not options or
    /// option values (for `run`: its NAMEs, and a command given without `--`).
    pub(super) positional: Vec<String>,
    /// Indices in the argument list of every `--` after the subcommand.
    pub(super) dashes_at: Vec<usize>,
    /// No subcommand: the word found where it was expected and the words
    /// after it (flock's and consul's `LOCK COMMAND` order).
    pub(super) not_sub: Option<(String, Vec<String>)>,
    /// The generic usage line of the subcommand (not clap's, which repeats
    /// the options given, as if they were needed).
    pub(super) usage: Option<String>,
}

impl Context {
    pub(super) fn of(args: &[OsString]) -> Self {
        let mut cmd = command();
        cmd.build();
        // Options that take a value in the next word, at the top and in each
        // subcommand (global ones are in every subcommand once built).
        let flags = spellings;
        let valued = |c: &clap::Command| flags(c, &|a| a.get_action().takes_values());
        let known = |c: &clap::Command| flags(c, &|_| true);
        let durations = |c: &clap::Command| {
            flags(c, &|a| {
                a.get_value_names()
                    .is_some_and(|names| names.iter().any(|n| n == "DUR"))
            })
        };
        let mut at = Context::default();
        let mut takes = valued(&cmd);
        let mut knows = known(&cmd);
        let mut durs: Vec<String> = Vec::new();
        let mut skip = false;
        for (i, arg) in args.iter().enumerate().skip(1) {
            let word = arg.to_string_lossy();
            if at.sub.is_some() && word == "--" {
                at.dashes_at.push(i);
                continue;
            }
            if skip || !at.dashes_at.is_empty() {
                skip = false;
                continue;
            }
            if word.starts_with('-') && word.len() > 1 {
                let flag = word.split_once('=').map_or(word.as_ref(), |(f, _)| f);
                // `-nv`, `-w5`: a cluster of shorts starts with a known one.
                let head = if flag.starts_with("--") {
                    flag.to_owned()
                } else {
                    flag.chars().take(2).collect()
                };
                if !knows.contains(&head) && at.positional.is_empty() {
                    at.unsure = true;
                }
                // `--wait 10 m`, not `--wait=10 m`: a value joined by `=`
                // ends at its word, so what follows is a NAME.
                if at.stray.is_none() && !word.contains('=') && durs.iter().any(|d| *d == flag) {
                    at.stray = stray_unit(flag, &args[i + 1..]);
                }
                // `--wait 5` or `-w 5`, not `--wait=5` or `-w5`.
                skip = !word.contains('=') && takes.iter().any(|t| *t == word);
                continue;
            }
            match &at.sub {
                None => {
                    if let Some(sub) = cmd.find_subcommand_mut(word.as_ref()) {
                        takes = valued(sub);
                        knows = known(sub);
                        durs = durations(sub);
                        at.usage = Some(words::plain_usage(sub));
                        at.sub = Some(word.into_owned());
                    } else {
                        let after = args[i + 1..]
                            .iter()
                            .map(|a| a.to_string_lossy().into_owned());
                        at.not_sub = Some((word.into_owned(), after.collect()));
                        break;
                    }
                }
                Some(_) => at.positional.push(word.into_owned()),
            }
        }
        at
    }

    /// The lock the command line names, when it names a valid one.
    pub(super) fn lock(&self) -> Option<&str> {
        let named = matches!(
            self.sub.as_deref(),
            Some("run" | "acquire" | "renew" | "release" | "status")
        );
        self.positional
            .first()
            .map(String::as_str)
            .filter(|n| named && !self.unsure && LockName::new(n).is_ok())
    }
}

/// For a lock NAME given where the subcommand goes, followed by a command
/// (`rlock deploy-prod -- ./deploy.sh`): the `run` line meant, COMMAND's
/// first word shown (the rest as `...`, their quoting being the user's own).
/// A word alone may as well be a misspelt subcommand: no guess.
pub(super) fn run_meant(word: &str, after: &[String]) -> Option<String> {
    LockName::new(word).ok()?;
    let command = match after.strip_prefix(&["--".to_owned()]).unwrap_or(after) {
        [] => return None,
        [program] => crate::report::sanitize(program),
        [program, ..] => format!("{} ...", crate::report::sanitize(program)),
    };
    let word = crate::report::sanitize(word);
    Some(format!(
        "to run COMMAND under the lock '{word}': rlock run {word} -- {command}"
    ))
}

/// Each option's spellings (aliases too) in `c`, of the options `which` picks.
fn spellings(c: &clap::Command, which: &dyn Fn(&clap::Arg) -> bool) -> Vec<String> {
    c.get_arguments()
        .filter(|a| !a.is_positional() && which(a))
        .flat_map(|a| {
            let longs = a
                .get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
                .map(|l| format!("--{l}"));
            let shorts = a
                .get_short()
                .into_iter()
                .chain(a.get_all_short_aliases().unwrap_or_default())
                .map(|s| format!("-{s}"));
            longs.chain(shorts).collect::<Vec<_>>()
        })
        .collect()
}

/// A duration option `flag` followed by `rest`, whose bare number is
/// followed by a unit in a word of its own (`--wait 10 m`): (the option,
/// the number, the unit).
fn stray_unit(flag: &str, rest: &[OsString]) -> Option<(String, String, String)> {
    let [value, next, ..] = rest else {
        return None;
    };
    let (value, next) = (value.to_string_lossy(), next.to_string_lossy());
    (bare_number(&value) && is_unit(&next))
        .then(|| (flag.to_owned(), value.trim().to_owned(), next.into_owned()))
}

//! Shell completions and the man page, rendered from the clap definitions in
//! `src/cli/`, so they cannot drift from `--help`. The committed copies in
//! `completions/` and `man/` are checked by the test `generated_files_are_fresh`
//! and rewritten by `RLOCK_UPDATE_GENERATED=1 cargo test generated_files`.

use clap_complete::Shell;

use crate::cli;

/// The completion script for `shell`.
pub fn completion(shell: Shell) -> String {
    let mut cmd = cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "rlock", &mut out);
    let script = String::from_utf8_lossy(&out).into_owned();
    // What clap_complete cannot say: after `--` comes rlock's COMMAND, to be
    // completed as a command and then as that command's own arguments (as
    // flock's completion does), and a NAME is not a file. zsh takes NAME's
    // value hint (nothing to offer); bash and fish ignore a positional's hint.
    match shell {
        Shell::Bash => script + BASH_AFTER_DASHES,
        Shell::Zsh => replace_once(&script, ZSH_RUN, ZSH_RUN_AFTER_DASHES),
        Shell::Fish => {
            replace_once(
                &script,
                FISH_USING_SUBCOMMAND,
                FISH_USING_SUBCOMMAND_BEFORE_DASHES,
            ) + FISH_AFTER_DASHES
        }
        _ => script,
    }
}

/// `script` with the one `from` replaced: clap_complete's output is fixed by
/// its version and rlock's definitions, so a missing anchor is a bug the
/// tests of the generated files catch.
fn replace_once(script: &str, from: &str, to: &str) -> String {
    assert_eq!(script.matches(from).count(), 1, "{from:?} in the script");
    script.replacen(from, to, 1)
}

/// Replaces clap's `complete -F _rlock -o bashdefault -o default rlock`
/// (registered last, so it wins): without bash's fallbacks to file names,
/// which clap leaves on for positionals, NAME positions offer no files. Option
/// values that are files are completed by clap's own `compgen -f`.
const BASH_AFTER_DASHES: &str = r#"
# After `--`: a command, then that command's own arguments (as flock's completion).
_rlock_after_dashes() {
    local i
    for (( i = 1; i < COMP_CWORD; i++ )); do
        if [[ ${COMP_WORDS[i]} == -- ]]; then
            if declare -F _command_offset >/dev/null; then
                _command_offset $(( i + 1 ))
            elif (( COMP_CWORD == i + 1 )); then
                mapfile -t COMPREPLY < <(compgen -c -- "${COMP_WORDS[COMP_CWORD]}")
            else
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -f -- "${COMP_WORDS[COMP_CWORD]}")
            fi
            return 0
        fi
    done
    _rlock "$@"
}
# No -o default or -o bashdefault: a lock NAME is not a file name.
complete -F _rlock_after_dashes rlock
"#;

/// The start of zsh's `rlock run` arguments (`rlock help run` has none).
const ZSH_RUN: &str = "(run)\n_arguments \"${_arguments_options[@]}\" : \\\n'";

/// clap's `_arguments -S` drops the `--` and completes NAMEs after it.
const ZSH_RUN_AFTER_DASHES: &str = r#"(run)
# After `--`: a command, then that command's own arguments (as flock's completion).
local -i dashes=${words[(i)--]}
if (( dashes < CURRENT )); then
    words=("${(@)words[dashes+1,-1]}")
    (( CURRENT -= dashes ))
    _normal && ret=0
    return ret
fi
_arguments "${_arguments_options[@]}" : \
'"#;

/// The test fish's clap script makes for a subcommand's options.
const FISH_USING_SUBCOMMAND: &str = "function __fish_rlock_using_subcommand\n";

/// ... holds before `--` only: after it, rlock's options are not offered.
const FISH_USING_SUBCOMMAND_BEFORE_DASHES: &str = "function __fish_rlock_using_subcommand
    __fish_rlock_after_dashes; and return 1
";

const FISH_AFTER_DASHES: &str = r#"
# After `--`: a command, then that command's own arguments (as flock's completion).
function __fish_rlock_after_dashes
    contains -- -- (commandline -opc)
end
function __fish_rlock_complete_after_dashes
    set -l words (commandline -opc)
    set -e words[1..(contains -i -- -- $words)]
    complete -C (string join -- ' ' (string escape -- $words) (commandline -ct))
end
complete -c rlock -n __fish_rlock_after_dashes -f -a '(__fish_rlock_complete_after_dashes)'
# A lock NAME (or list's PATTERN) is not a file name.
complete -c rlock -n '__fish_rlock_using_subcommand run acquire renew release status list' -f
"#;

/// The man page `rlock(1)`: every option of every subcommand, the environment,
/// the exit statuses and examples. Deterministic: no build date. A reference
/// that fits a few screens: each option with its short help (the first
/// paragraph of its doc comment, as `-h` shows it); the guide has the rest.
pub fn man_page() -> String {
    let cmd = short_help(cli::command().disable_help_subcommand(true));
    let man = clap_mangen::Man::new(cmd.clone())
        .date("")
        .manual("rlock manual")
        .source(format!("rlock {}", env!("CARGO_PKG_VERSION")));
    let mut out = Vec::new();
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    // The option lists without a blank line between entries: the page stays a
    // reference of a few screens.
    out.extend(b".PD 0\n");
    let mut global = Vec::new();
    let _ = man.render_options_section(&mut global);
    out.extend(
        String::from_utf8_lossy(&global)
            .replacen(".SH OPTIONS", ".sp\n.SH \"GLOBAL OPTIONS\"", 1)
            .replace("\n.SH CONNECTION", "\n.sp\n.SH CONNECTION")
            .bytes(),
    );
    let run = cmd.find_subcommand("run").cloned();
    for sub in cmd.get_subcommands() {
        let name = sub.get_name().to_uppercase();
        let sub_man =
            clap_mangen::Man::new(sub.clone().bin_name(format!("rlock {}", sub.get_name())));
        let mut part = Vec::new();
        let _ = sub_man.render_synopsis_section(&mut part);
        let _ = sub_man.render_description_section(&mut part);
        let _ = sub_man.render_options_section(&mut part);
        let mut part = String::from_utf8_lossy(&part)
            .replacen(".SH SYNOPSIS", &format!(".SH \"{name}\""), 1)
            .replacen(".SH DESCRIPTION\n", ".PP\n.sp\n", 1)
            .replacen(".SH OPTIONS", &format!(".SS \"{name} OPTIONS\""), 1);
        if sub.get_name() == "run" {
            part = run_synopsis(&part);
        }
        if let (Some(run), "acquire") = (&run, sub.get_name()) {
            part = options_shared_with_run(&part, sub, run);
        }
        // The option groups (WAITING, LEASE, ...) belong to their subcommand:
        // subsections of it, not sections of the page.
        let options = options_start(&part);
        let part = format!(
            "{}{}",
            &part[..options],
            part[options..].replace("\n.SH ", "\n.SS ")
        );
        out.extend(b".sp\n");
        out.extend(part.bytes());
    }
    out.extend(ENVIRONMENT_HEAD.bytes());
    out.extend(option_variable_lines().bytes());
    out.extend(EXTRA_SECTIONS.bytes());
    String::from_utf8_lossy(&out).into_owned()
}

/// `cmd` with only the short help of each option and subcommand (the long
/// help stays `--help`'s), each variable named once, in ENVIRONMENT, and
/// `--help` once, among the global options.
fn short_help(cmd: clap::Command) -> clap::Command {
    fn shorten(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(|arg| {
            // Each one's help names its values (clap insists the flag go only on
            // an argument that takes a value).
            let takes_value = arg.get_action().takes_values();
            // clap_mangen leaves out aliases; flock's spellings are the
            // ones a reader of the page looks for.
            let aliases = arg.get_visible_aliases().unwrap_or_default();
            let arg = match (aliases.is_empty(), arg.get_help()) {
                (false, Some(help)) => {
                    let also: Vec<String> = aliases.iter().map(|a| format!("--{a}")).collect();
                    let help = format!("{help}; also {}", also.join(", "));
                    arg.help(help)
                }
                _ => arg,
            };
            arg.long_help(None::<&str>)
                .hide_env(true)
                .hide_possible_values(takes_value)
        })
        .long_about(None::<&str>)
    }
    shorten(cmd).mut_subcommands(|sub| shorten(sub).disable_help_flag(true))
}

/// ENVIRONMENT's list of the options' variables, each beside its option,
/// from the definition (so a new option's variable cannot be left out).
fn option_variable_lines() -> String {
    let mut pairs: Vec<(String, String)> = Vec::new();
    fn walk(cmd: &clap::Command, pairs: &mut Vec<(String, String)>) {
        for arg in cmd.get_arguments() {
            if let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) {
                let var = var.to_string_lossy().into_owned();
                if !pairs.iter().any(|(v, _)| *v == var) {
                    pairs.push((var, long.to_string()));
                }
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, pairs);
        }
    }
    walk(&cli::command(), &mut pairs);
    // Named as the intro says (RLOCK_ and the long name): the names alone, in
    // one paragraph; an option whose variable is named otherwise says which.
    let names: Vec<String> = pairs
        .iter()
        .map(|(var, long)| {
            if *var == format!("RLOCK_{}", long.to_uppercase().replace('-', "_")) {
                format!("\\fB{var}\\fR")
            } else {
                format!("\\fB{var}\\fR (\\fB\\-\\-{}\\fR)", long.replace('-', "\\-"))
            }
        })
        .collect();
    let mut out = String::from(".PP\n.nh\n");
    out.push_str(&names.join(", "));
    out.push_str(".\n.hy\n");
    out
}

/// `run`'s synopsis as a user types it: NAMEs, then `--` and COMMAND, or `-c`
/// (clap's lists every option and shows COMMAND without its `--`).
fn run_synopsis(part: &str) -> String {
    let forms = "\\fBrlock\\fR [\\fIGLOBAL OPTIONS\\fR] \\fBrun\\fR [\\fIOPTIONS\\fR] \\fINAME\\fR... \\fB\\-\\-\\fR \\fICOMMAND\\fR [\\fIARGS\\fR...]\n.br\n\\fBrlock\\fR [\\fIGLOBAL OPTIONS\\fR] \\fBrun\\fR [\\fIOPTIONS\\fR] \\fINAME\\fR... \\fB\\-c\\fR \\fISTRING\\fR\n";
    let mut out = String::new();
    let mut replaced = false;
    for line in part.split_inclusive('\n') {
        if !replaced && line.starts_with("\\fBrlock run\\fR") {
            out.push_str(forms);
            replaced = true;
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Where a subcommand's options begin in its part of the page (its own heading
/// and description come before).
fn options_start(part: &str) -> usize {
    part.find("\n.SS ").unwrap_or(part.len())
}

/// `acquire`'s option groups are `run`'s (the same options, help and
/// variables): instead of printing them twice, the page names them and points
/// at RUN. Any acquire option `run` lacks keeps its own entry.
fn options_shared_with_run(part: &str, acquire: &clap::Command, run: &clap::Command) -> String {
    let shared: Vec<&clap::Arg> = acquire
        .get_arguments()
        .filter(|a| a.get_help_heading().is_some())
        .collect();
    let same = |a: &clap::Arg| {
        run.get_arguments().any(|r| {
            r.get_id() == a.get_id()
                && r.get_help().map(|h| h.to_string()) == a.get_help().map(|h| h.to_string())
        })
    };
    if shared.is_empty() || !shared.iter().all(|a| same(a)) {
        return part.to_string();
    }
    let options = options_start(part);
    let Some(first_group) = part[options..].find("\n.SH ").map(|i| options + i) else {
        return part.to_string();
    };
    let names: Vec<String> = shared
        .iter()
        .filter_map(|a| a.get_long())
        .map(|l| format!("\\fB\\-\\-{}\\fR", l.replace('-', "\\-")))
        .collect();
    format!(
        "{}\n.PP\nAnd the options of \\fBrun\\fR above, with the same meaning, defaults and \
         environment variables: {}.\n",
        &part[..first_group],
        names.join(", ")
    )
}

/// ENVIRONMENT's opening; the options' variables follow, one a line.
const ENVIRONMENT_HEAD: &str = r#".PD
.SH ENVIRONMENT
These options may be set in the environment, as RLOCK_ and the long name in capitals
with _ for - (\fB--no-wait\fR: \fBRLOCK_NO_WAIT\fR). The command line wins over its
variable and its opposite's (\fB--wait\fR over \fBRLOCK_NO_WAIT\fR); opposites both
set in the environment are a usage error. Switches are off when unset, empty, 0, f,
false, n, no or off. A duration is a bare number of seconds (5, 0.5) or a number with a
unit (500ms, 10m).
"#;

/// The hand-written sections after the options' variables.
const EXTRA_SECTIONS: &str = r#".PP
Also read:
.PD 0
.TP 20
\fBREDIS_URL\fR
the URL without \fB--url\fR or \fBRLOCK_URL\fR
.TP 20
\fBREDISCLI_AUTH\fR
the password, when the URL has none (never printed)
.TP 20
\fBRLOCK_TOKEN\fR
\fBrenew\fR, \fBrelease\fR: the token when \fB--token\fR is not given
.TP 20
\fBNOTIFY_SOCKET\fR
systemd \fBType=notify\fR: STATUS=, READY=1, STOPPING=1
.TP 20
\fBWATCHDOG_USEC\fR
\fBWatchdogSec=\fR: WATCHDOG=1, unless \fBWATCHDOG_PID\fR differs
.TP 20
\fBHOME\fR
expands \fB~\fR in \fB--url file:~/DIR\fR
.PD
.PP
Without \fB--note\fR, the note is the CI job's URL: from \fBGITHUB_SERVER_URL\fR,
\fBGITHUB_REPOSITORY\fR and \fBGITHUB_RUN_ID\fR (GitHub Actions); else \fBCI_JOB_URL\fR
(GitLab), \fBBUILDKITE_BUILD_URL\fR or \fBBUILD_URL\fR (Jenkins).
.PP
COMMAND gets \fBRLOCK_NAME\fR, \fBRLOCK_TOKEN\fR (a capability: do not log it),
\fBRLOCK_FENCE\fR (strictly increases with every acquisition of the name),
\fBRLOCK_FENCES\fR (name=fence for each name) and \fBRLOCK_TOKENS\fR (for re-entry).
.SH "EXIT STATUS"
.PD 0
.TP 10
COMMAND
COMMAND ran: its exit status; 128+N if it died by signal N.
.TP 10
0
\fBacquire\fR, \fBrenew\fR, \fBrelease\fR, \fBstatus\fR, \fBlist\fR succeeded; \fBstatus --check\fR: every NAME is held.
.TP 10
1
\fBrenew\fR, \fBrelease\fR: the token does not hold the lock; \fBrelease --force\fR: nothing held it; \fBstatus --check\fR: a NAME is free (nothing is printed); \fBcheck\fR: a warning or an unknown.
.TP 10
2
Usage error: bad option, duration, URL or NAME, missing \fB--\fR or COMMAND.
.TP 10
69
Server unavailable: cannot connect or authenticate, server error, a lock key of another type.
.TP 10
70
The lock was lost or the lease ended while COMMAND ran; COMMAND was stopped.
.TP 10
75
The lock was not acquired (taken, or \fB--wait\fR elapsed); changed by \fB-E\fR.
.TP 10
124
COMMAND ran past \fB--max-hold\fR and was stopped; the lock was released.
.TP 10
125
Any other failure of rlock itself.
.TP 10
126, 127
COMMAND found but not executable, or not found.
.TP 10
128+N
rlock was interrupted by signal N while waiting; nothing was acquired or left behind.
.PD
.SH EXAMPLES
.nf
rlock run nightly-backup -- ./backup.sh          # never two at once
rlock run --wait 10m deploy-prod -- make deploy  # wait up to 10 minutes
rlock run --no-wait -E 0 report -- ./report.sh   # skip when taken
rlock run --limit 3 deploy-slot -- ./deploy.sh   # at most three at once
rlock run --shared db -- ./tests.sh              # many at once, never
rlock run db -- ./migrate.sh                     #   beside a migration
token=$(rlock acquire --wait 5m --while-pid $$ deploy)   # in a script
rlock release deploy --token "$token"
rlock status deploy                              # who holds, who waits
rlock history nightly-backup                     # last night's events
rlock status --check deploy || alert 'not running'   # exit 1 when free
rlock release deploy --force                     # break any hold
.fi
.SH FILES
rlock reads no configuration file. With \fB--url file:\fR\fIDIR\fR it needs no server
and locks on this host only, with flock(2) on \fIDIR\fR\fB/\fR\fINAME\fR\fB.lock\fR
(flock(1) on that file and rlock exclude each other), beside \fINAME\fR\fB.fence\fR,
\fINAME\fR\fB.history\fR, \fINAME\fR\fB.gate\fR and the records of holders and waiters.
With Redis, a lock lives in keys under \fIPREFIX\fR\fB:{\fR\fINAME\fR\fB}\fR, which
expire by themselves.
.SH "SEE ALSO"
flock(1), timeout(1), redis\-cli(1), flock(2)
.PP
The guide has every option in depth, the recipes (cron, systemd, CI, Kubernetes) and
the guarantees: /usr/share/doc/rlock/docs/guide.md from the .deb, \fBdocs/guide.md\fR
in the release tarball. Also there: the README, the FAQ and the production checklist.
"#;

/// Every environment variable an option reads (`RLOCK_WAIT`, ...), sorted,
/// from the definition: the list a clean environment clears and the man
/// page's ENVIRONMENT must cover.
pub fn option_variables() -> Vec<String> {
    fn walk(cmd: &clap::Command, vars: &mut Vec<String>) {
        vars.extend(
            cmd.get_arguments()
                .filter_map(clap::Arg::get_env)
                .map(|v| v.to_string_lossy().into_owned()),
        );
        for sub in cmd.get_subcommands() {
            walk(sub, vars);
        }
    }
    let mut vars = Vec::new();
    walk(&cli::command(), &mut vars);
    vars.sort();
    vars.dedup();
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_man_page_covers_every_run_option_and_the_exit_statuses() {
        // roff escapes every hyphen in option names.
        let page = man_page().replace("\\-", "-");
        for needle in [
            "--no-wait",
            "--kill-after",
            "--max-hold",
            "--shared",
            "--limit",
            "--fair",
            "--redisson",
            "also --timeout",
            "also --nonblock, --nb",
            "EXIT STATUS",
            "REDISCLI_AUTH",
            "EXAMPLES",
            "SEE ALSO",
            "FILES",
        ] {
            assert!(page.contains(needle), "{needle}");
        }
    }

    #[test]
    fn the_man_page_says_each_option_group_once_and_runs_synopsis_has_dashes_and_c() {
        let page = man_page();
        for group in ["WAITING", "LEASE", "\"LOCK KINDS\"", "RECORDS"] {
            let count = page.matches(&format!("\n.SS {group}\n")).count();
            assert_eq!(count, 1, "{group} appears {count} times");
            assert!(
                !page.contains(&format!("\n.SH {group}\n")),
                "{group} is a section"
            );
        }
        let run = &page[page.find(".SH \"RUN\"").unwrap()..];
        let synopsis: Vec<&str> = run.lines().skip(1).take(3).collect();
        assert!(
            synopsis[0].contains("\\fB\\-\\-\\fR \\fICOMMAND\\fR"),
            "{synopsis:?}"
        );
        assert!(
            synopsis[2].contains("\\fB\\-c\\fR \\fISTRING\\fR"),
            "{synopsis:?}"
        );
        let acquire =
            &page[page.find(".SH \"ACQUIRE\"").unwrap()..page.find(".SH \"RENEW\"").unwrap()];
        assert!(acquire.contains("And the options of \\fBrun\\fR above"));
        assert!(acquire.contains("\\fB\\-\\-wait\\fR"));
    }
}

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
/// the exit statuses and examples. Deterministic: no build date.
pub fn man_page() -> String {
    let cmd = cli::command().disable_help_subcommand(true);
    let man = clap_mangen::Man::new(cmd.clone())
        .date("")
        .manual("rlock manual")
        .source(format!("rlock {}", env!("CARGO_PKG_VERSION")));
    let mut out = Vec::new();
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    let mut global = Vec::new();
    let _ = man.render_options_section(&mut global);
    out.extend(
        String::from_utf8_lossy(&global)
            .replacen(".SH OPTIONS", ".SH \"GLOBAL OPTIONS\"", 1)
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
            .replacen(".SH DESCRIPTION\n", ".PP\n", 1)
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
        out.extend(part.bytes());
    }
    out.extend(EXTRA_SECTIONS.bytes());
    String::from_utf8_lossy(&out).into_owned()
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

const EXTRA_SECTIONS: &str = r#".SH ENVIRONMENT
An option given on the command line wins over its variable, and over the variable of
its opposite (\fB--wait\fR over \fBRLOCK_NO_WAIT\fR, \fB--shared\fR over \fBRLOCK_LIMIT\fR,
\fB--lease\fR over \fBRLOCK_TTL\fR, and the other way round); opposites both set in the
environment are a usage error. The switches (\fBRLOCK_NO_WAIT\fR, \fBRLOCK_SHARED\fR,
\fBRLOCK_FAIR\fR, \fBRLOCK_REDISSON\fR) are off when unset, empty, 0, f, false, n, no or off.
A duration is a bare number of seconds (5, 0.5) or a number with a unit (500ms, 10m).
.TP
\fBRLOCK_URL\fR
Server URL(s), comma-separated, when \fB--url\fR is not given.
.TP
\fBREDIS_URL\fR
Server URL when neither \fB--url\fR nor \fBRLOCK_URL\fR is given. Default: redis://127.0.0.1:6379.
.TP
\fBREDISCLI_AUTH\fR
Password, used when the URL has none. Never printed.
.TP
\fBRLOCK_PASSWORD_FILE\fR
\fB--password-file\fR: a file holding the password (mode 0600), read again for every new connection.
.TP
\fBRLOCK_PASSWORD_COMMAND\fR
\fB--password-command\fR: a command run with \fBsh -c\fR for every new connection; its first line of output is the password (at most 10s; a failure is exit 69 with its stderr's first line).
.TP
\fBRLOCK_PREFIX\fR
\fB--prefix\fR: key namespace (default rlock).
.TP
\fBRLOCK_CACERT\fR
\fB--cacert\fR: CA certificate (PEM) to trust for rediss:// servers.
.TP
\fBRLOCK_CERT\fR
\fB--cert\fR: client certificate (PEM) for rediss:// servers.
.TP
\fBRLOCK_KEY\fR
\fB--key\fR: client private key (PEM) for rediss:// servers.
.TP
\fBRLOCK_CONNECT_TIMEOUT\fR
\fB--connect-timeout\fR: bound on each connection attempt and each reply (default 2s).
.TP
\fBRLOCK_WAIT\fR
\fB--wait\fR: how long \fBrun\fR and \fBacquire\fR wait for the lock (default: forever).
.TP
\fBRLOCK_NO_WAIT\fR
\fB--no-wait\fR: give up at once when the lock is taken.
.TP
\fBRLOCK_NOTE\fR
\fB--note\fR: what this holder is, shown by \fBstatus\fR, \fBlist\fR, \fB--json\fR, waiting runs and their messages.
.TP
\fBRLOCK_PROGRESS_INTERVAL\fR
\fB--progress-interval\fR: how often a waiting run off a terminal prints a line (default 30s; 0: never).
.TP
\fBRLOCK_UNREACHABLE_WAIT\fR
\fB--unreachable-wait\fR: how long to wait for an unreachable server without \fB--wait\fR (default 60s).
.TP
\fBRLOCK_CONFLICT_EXIT_CODE\fR
\fB-E\fR: exit status when the lock was not acquired (default 75).
.TP
\fBRLOCK_TTL\fR
\fB--ttl\fR: lease length (default 30s).
.TP
\fBRLOCK_LEASE\fR
\fB--lease\fR: fixed lease without renewal (\fBrun\fR).
.TP
\fBRLOCK_MAX_HOLD\fR
\fB--max-hold\fR: stop COMMAND this long after it started, exit 124 (\fBrun\fR).
.TP
\fBRLOCK_HISTORY\fR
\fB--history\fR: how many of the lock's last events to keep for \fBrlock history\fR (default 100; 0: none).
.TP
\fBRLOCK_METRICS_FILE\fR
\fB--metrics-file\fR: where \fBrun\fR writes its outcome in Prometheus' text format.
.TP
\fBRLOCK_NOTIFY_READY\fR
\fB--notify-ready\fR: under systemd, READY=1 once the lock is held (held, the default) or at once (start) (\fBrun\fR).
.TP
\fBRLOCK_READY_FILE\fR
\fB--ready-file\fR: a file that exists exactly while the lock is held and COMMAND runs (\fBrun\fR).
.TP
\fBRLOCK_PING\fR
\fB--ping\fR: a monitor URL told in healthchecks.io's protocol: URL/start when the lock is taken, URL/<exit status> after the release, URL/log for a run skipped because the lock was taken (\fBrun\fR).
.TP
\fBNOTIFY_SOCKET\fR
Set by systemd for \fBType=notify\fR: \fBrun\fR sends STATUS= (what it waits for or holds), READY=1, EXTEND_TIMEOUT_USEC= while it waits and STOPPING=1 when COMMAND ends; the progress log then says only when the wait starts and when the holder changes.
.TP
\fBWATCHDOG_USEC\fR, \fBWATCHDOG_PID\fR
Set by systemd for \fBWatchdogSec=\fR: \fBrun\fR sends WATCHDOG=1 after each answer from the server while it waits and each confirmed renewal while it holds, hearing from the server and renewing at least every half of it (ignored when \fBWATCHDOG_PID\fR names another process).
.TP
\fBRLOCK_KILL_AFTER\fR
\fB--kill-after\fR: grace between SIGTERM and SIGKILL (\fBrun\fR).
.TP
\fBRLOCK_SIGNAL_GRACE\fR
\fB--signal-grace\fR: kill COMMAND's group this long after forwarding it SIGINT, SIGTERM or SIGHUP, release, exit 128+N (\fBrun\fR; default: off).
.TP
\fBRLOCK_SHARED\fR
\fB--shared\fR: a shared (read) lock.
.TP
\fBRLOCK_LIMIT\fR
\fB--limit\fR: a semaphore of N holders.
.TP
\fBRLOCK_FAIR\fR
\fB--fair\fR: first come, first served among waiters.
.TP
\fBRLOCK_MIN_REPLICAS\fR
\fB--min-replicas\fR: replicas that must have the lock.
.TP
\fBRLOCK_REDISSON\fR
\fB--redisson\fR: a lock exactly as Redisson's getLock(NAME) stores it.
.TP
\fBRLOCK_TOKEN\fR
\fBrenew\fR, \fBrelease\fR: the owner token when \fB--token\fR is not given (kept off the command line, which \fBps\fR shows); a nested \fBrlock run\fR of the same NAME re-enters with it.
.TP
\fBGITHUB_SERVER_URL\fR, \fBGITHUB_REPOSITORY\fR, \fBGITHUB_RUN_ID\fR
Without \fB--note\fR, the note is the URL of the GitHub Actions run (server/\:repository/\:actions/\:runs/\:id) when all three are set;
.TP
\fBCI_JOB_URL\fR
else GitLab CI's job URL;
.TP
\fBBUILDKITE_BUILD_URL\fR
else Buildkite's build URL;
.TP
\fBBUILD_URL\fR
else Jenkins' build URL. A note is one line of at most 200 bytes, without URL passwords.
.TP
\fBHOME\fR
Expands \fB~\fR in \fB--url file:~/DIR\fR.
.PP
COMMAND gets \fBRLOCK_NAME\fR (the name(s)), \fBRLOCK_TOKEN\fR (its owner token: a
capability, do not log it), \fBRLOCK_FENCE\fR (fencing token: strictly increases with every
acquisition of the name), \fBRLOCK_FENCES\fR (name=fence for each name) and
\fBRLOCK_TOKENS\fR (tokens of every enclosing run, for re-entry).
.SH "EXIT STATUS"
.TP
COMMAND's status
COMMAND ran; 128+N if it died by signal N.
.TP
0
\fBacquire\fR, \fBrenew\fR, \fBrelease\fR, \fBstatus\fR, \fBlist\fR succeeded; \fBstatus --check\fR: every NAME is held.
.TP
1
\fBrenew\fR, \fBrelease\fR: the token does not hold the lock (expired, released, or not a token); \fBrelease --force\fR: nothing held it; \fBstatus --check\fR: a NAME is free (nothing is printed).
.TP
2
Usage error: bad option, duration, URL or NAME, missing \fB--\fR or COMMAND.
.TP
69
Server unavailable: cannot connect or authenticate, server error, a lock key of another type.
.TP
70
The lock was lost or the lease ended while COMMAND ran; COMMAND was stopped.
.TP
75
The lock was not acquired (taken, or \fB--wait\fR elapsed); changed by \fB-E\fR.
.TP
124
COMMAND ran past \fB--max-hold\fR and was stopped (SIGTERM, then SIGKILL after \fB--kill-after\fR); the lock was released.
.TP
125
Any other failure of rlock itself.
.TP
126, 127
COMMAND found but not executable, or not found.
.TP
128+N
rlock was interrupted by signal N while waiting; nothing was acquired or left behind.
.SH EXAMPLES
.TP
\fBrlock run nightly-backup -- ./backup.sh\fR
Never two backups at once, on any host.
.TP
\fBrlock run --wait 10m deploy-prod -- make deploy\fR
Serialize deploys across CI runners, waiting up to 10 minutes.
.TP
\fBrlock run --no-wait -E 0 report -- ./report.sh\fR
Skip quietly when the previous run still holds the lock.
.TP
\fBrlock run --limit 3 deploy-slot -- ./deploy.sh\fR
At most three at once.
.TP
\fBrlock run --shared db -- ./tests.sh\fR
Many test suites at once, never beside \fBrlock run db -- ./migrate.sh\fR.
.TP
\fBtoken=$(rlock acquire --wait 5m --while-pid $$ deploy)\fR
A critical section in a shell script: held while the shell lives; \fBrlock release deploy --token "$token"\fR ends it early.
.TP
\fBrlock status deploy\fR, \fBrlock list --json 'deploy-*'\fR
Who holds the lock (pid, host, command and note), since when, who waits.
.TP
\fBrlock status --check deploy || alert 'deploy is not running'\fR
Monitoring: exits 1 when the lock is free.
.TP
\fBrlock run --metrics-file /var/lib/prometheus/node-exporter/rlock.prom --max-hold 3h nightly-backup -- ./backup.sh\fR
What happened last night: the run's outcome for node_exporter's textfile collector (last success, wait, hold, exit status; Debian's directory, elsewhere the one \fB--collector.textfile.directory\fR names, often /var/lib/node_exporter/textfile_collector); a hung backup is stopped after 3 hours (exit 124).
.TP
\fBrlock run --unreachable-wait forever --ready-file /run/scheduler.ready scheduler -- /app/scheduler\fR
A hot standby on every host (a systemd \fBType=notify\fR unit, a Kubernetes Deployment): one runs, the others wait and take over; the file exists only where it runs..TP
\fBrlock history nightly-backup\fR, \fBrlock history --json --limit 10 deploy\fR
What happened last night: the lock's last events, newest first (acquired, released, busy, lost, forced, max-hold, interrupted), with host, pid, command, fence, time waited or held and exit status.
.TP
\fBrlock metrics 'deploy-*'\fR
The locks now, in Prometheus' text format.
.TP
\fBrlock release deploy --force\fR
Break any hold (operators); the evicted run stops its COMMAND and exits 70.
.SH FILES
rlock reads no configuration file. With \fB--url file:\fR\fIDIR\fR (\fBfile:~/\fR\fIDIR\fR
for one under \fBHOME\fR) it needs no server and locks on this host only, with
flock(2) on files in \fIDIR\fR (an absolute path, created mode 0700 when missing; one
that others may write to is refused unless it has the sticky bit). A NAME becomes a
file name with ASCII bytes outside A\-Za\-z0\-9_\- written %XX:
.TP
\fIDIR\fR\fB/\fR\fINAME\fR\fB.lock\fR
The lock itself: flock(1) on this file and \fBrlock\fR exclude each other. It stays
when the lock is free, as flock(1)'s files do; COMMAND inherits it, so the lock lasts
while anything COMMAND started still holds it.
.TP
\fIDIR\fR\fB/\fR\fINAME\fR\fB.fence\fR
The last fence handed out (\fBRLOCK_FENCE\fR), replaced in one step; never expires.
.TP
\fIDIR\fR\fB/\fR\fINAME\fR\fB.history\fR
The lock's last events, for \fBrlock history\fR.
.TP
\fIDIR\fR\fB/\fR\fINAME\fR\fB.gate\fR, other \fIDIR\fR\fB/\fR\fINAME\fR\fB.*\fR
A short per-lock gate, and the records of holders and waiters (removed when they end).
.PP
\fB--min-replicas\fR, \fB--redisson\fR, \fB--fair\fR, other URLs and \fBacquire\fR
without \fB--while-pid\fR are refused with \fBfile:\fR; \fB--ttl\fR, \fB--lease\fR and
\fB--prefix\fR have no effect there. With Redis, a lock lives in keys under
\fIPREFIX\fR\fB:{\fR\fINAME\fR\fB}\fR, which expire by themselves.
.SH "SEE ALSO"
flock(1), timeout(1), redis\-cli(1), flock(2)
.PP
The README, the guide (every option in depth, lock kinds, Redisson, Sentinel, Cluster,
Redlock, TLS, ACL users, guarantees), the FAQ and the production checklist, in
/usr/share/doc/rlock/ (the .deb) or the release tarball.
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

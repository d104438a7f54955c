//! The committed completions and man page match what the clap definitions
//! render. To update them: `RLOCK_UPDATE_GENERATED=1 cargo test generated`.
//! The completions are tried in bash, zsh and fish (scripts/test installs
//! them), and `--help` is checked beside the man page.

use clap_complete::Shell;

#[test]
fn generated_files_are_fresh() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = [
        (
            "completions/rlock.bash",
            rlock::generate::completion(Shell::Bash),
        ),
        (
            "completions/_rlock",
            rlock::generate::completion(Shell::Zsh),
        ),
        (
            "completions/rlock.fish",
            rlock::generate::completion(Shell::Fish),
        ),
        ("man/rlock.1", rlock::generate::man_page()),
    ];
    let update = std::env::var_os("RLOCK_UPDATE_GENERATED").is_some();
    let mut stale = Vec::new();
    for (path, fresh) in files {
        let path = root.join(path);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &fresh).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(fresh.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale: {stale:?}; run `RLOCK_UPDATE_GENERATED=1 cargo test generated` and commit"
    );
}

#[test]
fn completions_subcommand_prints_the_script() {
    let out =
        crate::support::rlock::output(crate::support::rlock::bare().args(["completions", "fish"]));
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        rlock::generate::completion(Shell::Fish)
    );
}

/// Bash completes a command after `--` (as flock's completion does), and
/// rlock's own options before it.
#[test]
fn bash_completes_a_command_after_the_dashes() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = format!(
        "source {}; \
         COMP_WORDS=(rlock run x -- ech); COMP_CWORD=4; _rlock_after_dashes rlock ech --; \
         printf 'after:%s\\n' \"${{COMPREPLY[@]}}\"; \
         COMP_WORDS=(rlock run --wa); COMP_CWORD=2; _rlock_after_dashes rlock --wa run; \
         printf 'before:%s\\n' \"${{COMPREPLY[@]}}\"",
        root.join("completions/rlock.bash").display()
    );
    let out = std::process::Command::new("bash")
        .args(["--norc", "-c", &script])
        .output()
        .expect("bash runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l == "after:echo"), "{text}");
    assert!(
        !text.contains("after:--"),
        "no rlock option after --: {text}"
    );
    assert!(text.lines().any(|l| l == "before:--wait"), "{text}");
}

/// The environment variables the options read, from the command line's
/// definition.
fn option_env_vars() -> Vec<String> {
    let vars = rlock::cli::option_variables();
    assert!(vars.len() >= 20, "{vars:?}");
    vars
}

/// `--help` and the man page name each option's environment variable without
/// its value: `[env: RLOCK_PREFIX]`, never `[env: RLOCK_PREFIX=]` when unset
/// nor the value when set (a note or a URL may say more than help should).
#[test]
fn help_names_environment_variables_without_values() {
    let mut seen = String::new();
    for args in [&["--help"][..], &["run", "--help"], &["acquire", "--help"]] {
        let out = crate::support::rlock::output(
            crate::support::rlock::bare()
                .env("RLOCK_NOTE", "note-value-42")
                .args(args),
        );
        assert!(out.status.success(), "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("[env: RLOCK_PREFIX]"), "{args:?}: {help}");
        assert!(!help.contains("=]"), "{args:?}: {help}");
        assert!(!help.contains("note-value-42"), "{args:?}: {help}");
        // bare() sets RLOCK_PROGRESS_INTERVAL=0.
        assert!(
            !help.contains("RLOCK_PROGRESS_INTERVAL="),
            "{args:?}: {help}"
        );
        seen.push_str(&help);
    }
    let page = rlock::generate::man_page();
    let environment = &page[page.find(".SH ENVIRONMENT\n").expect("ENVIRONMENT")..];
    let environment = &environment[..environment[1..].find("\n.SH ").unwrap() + 1];
    for var in option_env_vars() {
        assert!(seen.contains(&format!("[env: {var}]")), "{var} in --help");
        assert!(
            environment.contains(&format!("\\fB{var}\\fR")),
            "{var} in the man page's ENVIRONMENT"
        );
        assert!(!page.contains(&format!("{var}=")), "{var}= in the man page");
    }
}

/// Command lines whose last word, `b`, is a lock NAME (or list's PATTERN)
/// being typed in a directory holding backup.sh and build.log: no shell may
/// offer those files there.
const NAME_POSITIONS: [&str; 8] = [
    "rlock run demo b",
    "rlock run b",
    "rlock -v run -w 5 demo b",
    "rlock acquire b",
    "rlock renew b",
    "rlock release b",
    "rlock status demo b",
    "rlock list b",
];

/// What follows `--` is a command, then that command's arguments; files are
/// still offered where an option takes a file.
const ELSEWHERE: [&str; 5] = [
    "rlock run demo -- ech",
    "rlock run -w 5 demo -- ech",
    "rlock run demo -- cat b",
    "rlock run demo -- cat --",
    "rlock run --cacert b",
];

/// What `shell` offers for each command line: (line, word) pairs, from
/// a scratch directory holding backup.sh and build.log.
fn offered(shell: &str, lines: &[&str]) -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    let dir = crate::support::scratch::Scratch::new();
    for file in ["backup.sh", "build.log"] {
        std::fs::write(dir.path().join(file), "").unwrap();
    }
    let mut cmd = match shell {
        "bash" => {
            let mut cmd = std::process::Command::new("bash");
            cmd.args(["--norc", "--noprofile", "-c", BASH_OFFERED, "bash"])
                .arg(root.join("rlock.bash"));
            cmd
        }
        "zsh" => {
            let mut cmd = std::process::Command::new("zsh");
            cmd.args(["-f", "-c", ZSH_OFFERED, "zsh"]).arg(&root);
            cmd
        }
        "fish" => {
            let mut cmd = std::process::Command::new("fish");
            cmd.args(["-c", FISH_OFFERED]).arg(root.join("rlock.fish"));
            cmd
        }
        _ => unreachable!(),
    };
    // No user configuration read, nothing written to the real home.
    for var in ["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"] {
        cmd.env(var, dir.path());
    }
    cmd.env_remove("ZDOTDIR")
        .args(lines)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{shell} runs (scripts/test installs it): {e}"));
    let out =
        crate::support::process::Proc::new(child).output_within(std::time::Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{shell}: {}",
        crate::support::rlock::show(&out)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(line, word)| (line.to_owned(), word.to_owned()))
        .collect()
}

/// bash, as readline calls a completion function: the function `complete -p
/// rlock` registered, then, when it offers nothing and the registration asks
/// for bash's fallbacks (`-o default`, `-o bashdefault`), file names.
const BASH_OFFERED: &str = r#"
source "$1"; shift
spec=$(complete -p rlock)
[[ $spec =~ -F\ ([^ ]+) ]] || exit 3
func=${BASH_REMATCH[1]}
for line in "$@"; do
    read -ra COMP_WORDS <<< "$line"
    [[ $line == *' ' ]] && COMP_WORDS+=('')
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMP_LINE=$line; COMP_POINT=${#line}
    COMPREPLY=()
    "$func" rlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
    if (( ${#COMPREPLY[@]} == 0 )) && [[ $spec == *'-o default'* || $spec == *'-o bashdefault'* ]]; then
        mapfile -t COMPREPLY < <(compgen -f -- "${COMP_WORDS[COMP_CWORD]}")
    fi
    for word in "${COMPREPLY[@]}"; do printf '%s\t%s\n' "$line" "$word"; done
done
"#;

/// zsh, interactive in a pseudo-terminal (zpty): each line is typed and
/// completed with TAB, and every match the completion system adds is printed.
const ZSH_OFFERED: &str = r#"
zmodload zsh/zpty || exit 3
fpath_dir=$1; shift
zpty z zsh -f -i
zpty -w z "PROMPT=''; RPROMPT=''; fpath=(${(q)fpath_dir} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z 'compadd () {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
    local -a hits; builtin compadd -A hits "$@"; local ret=$?
    local hit; for hit in $hits; do print -r -- "<HI""T>$hit"; done
    return ret
}'
zpty -w z 'bindkey "^I" complete-word; print "<EN""D>"'
# Prints the matches of $line until the line "<END>"; fails after 20s.
# Output is looked at in whole lines only: under load a read may end inside
# a line (half a hit) or hold several (a hit and the end). The markers are
# typed split in two ("<EN""D>"), so the terminal's echo of what is typed,
# which may arrive in pieces, never holds one.
read_matches() {
    local out buf= piece deadline=$(( SECONDS + 20 ))
    while (( SECONDS < deadline )); do
        if zpty -r -t z out; then
            buf+=$out
            while [[ $buf == *$'\n'* ]]; do
                piece=${buf%%$'\n'*}
                buf=${buf#*$'\n'}
                [[ $piece == *'<HIT>'* ]] && print -r -- "$line"$'\t'"${${piece##*<HIT>}%%$'\r'*}"
                [[ $piece == *'<END>'* ]] && return 0
            done
        else
            sleep 0.02
        fi
    done
    print -u2 "zsh: no completion for: $line"
    return 1
}
line=; read_matches || exit 1
for line in "$@"; do
    zpty -n -w z "$line"$'\t'
    zpty -w z $'\C-e\C-u print "<EN""D>"'
    read_matches || exit 1
done
zpty -d z
"#;

/// fish's own `complete -C`: the completions of a command line.
const FISH_OFFERED: &str = r#"
source $argv[1]
for line in $argv[2..]
    for word in (complete -C"$line" | string replace -r '\t.*' '')
        printf '%s\t%s\n' $line $word
    end
end
"#;

/// Completions in `shell`: nothing for NAME positions, a command and its
/// arguments after `--`.
fn check_completions(shell: &str) {
    let lines: Vec<&str> = NAME_POSITIONS.iter().chain(&ELSEWHERE).copied().collect();
    let offered = offered(shell, &lines);
    let words = |line: &str| -> Vec<&str> {
        offered
            .iter()
            .filter(|(l, _)| l == line)
            .map(|(_, w)| w.as_str())
            .collect()
    };
    for line in NAME_POSITIONS {
        let words = words(line);
        assert!(
            !words.iter().any(|w| w.starts_with('b')),
            "{shell}: `{line}` offers {words:?}"
        );
    }
    for (line, wanted) in [
        ("rlock run demo -- ech", "echo"),
        ("rlock run -w 5 demo -- ech", "echo"),
        ("rlock run demo -- cat b", "backup.sh"),
        ("rlock run --cacert b", "backup.sh"),
    ] {
        let words = words(line);
        assert!(
            words.contains(&wanted),
            "{shell}: `{line}` offers {words:?}"
        );
    }
    let words = words("rlock run demo -- cat --");
    assert!(
        !words
            .iter()
            .any(|w| w.starts_with("--note") || w.starts_with("--wait")),
        "{shell}: rlock's options after `--`: {words:?}"
    );
    // bash completes a command's options with the bash-completion package
    // only; zsh and fish complete them on their own.
    if shell != "bash" {
        assert!(
            words.contains(&"--number"),
            "{shell}: cat's options: {words:?}"
        );
    }
}

#[test]
fn bash_offers_no_file_names_for_a_lock_name() {
    check_completions("bash");
}

#[test]
fn zsh_offers_no_file_names_for_a_lock_name_and_commands_after_the_dashes() {
    check_completions("zsh");
}

#[test]
fn fish_offers_no_file_names_for_a_lock_name_and_commands_after_the_dashes() {
    check_completions("fish");
}

/// The man page's ENVIRONMENT names every variable rlock reads: each option's,
/// RLOCK_TOKEN, and the CI variables a note is taken from (src/config/note.rs); EXIT
/// STATUS has `status --check`; and the man page and `--help` say that a bare
/// number is seconds and that `status` shows the note.
#[test]
fn the_man_page_and_help_document_the_environment_and_status_check() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let note_rs = std::fs::read_to_string(root.join("src/config/note.rs")).unwrap();
    let note_rs = &note_rs[..note_rs.find("#[cfg(test)]").unwrap()];
    let ci_vars: Vec<&str> = note_rs
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| s.len() > 2 && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        .collect();
    assert!(ci_vars.contains(&"GITHUB_RUN_ID") && ci_vars.contains(&"BUILD_URL"));
    let page = rlock::generate::man_page();
    let section = |title: &str| {
        let start = page.find(title).unwrap_or_else(|| panic!("{title}"));
        let rest = &page[start + title.len()..];
        rest[..rest.find("\n.SH ").unwrap_or(rest.len())].to_owned()
    };
    let environment = section(".SH ENVIRONMENT\n");
    let mut vars = option_env_vars();
    vars.push("RLOCK_TOKEN".into());
    vars.extend(ci_vars.iter().map(|v| v.to_string()));
    for var in vars {
        assert!(
            environment.contains(&format!("\\fB{var}\\fR")),
            "{var} in ENVIRONMENT"
        );
    }
    let exit = section(".SH \"EXIT STATUS\"\n");
    assert!(
        exit.contains("\\fBstatus --check\\fR: a NAME is free"),
        "{exit}"
    );
    assert!(
        exit.contains("\\fBstatus --check\\fR: every NAME is held"),
        "{exit}"
    );
    let page = page.replace("\\-", "-");
    assert!(
        page.contains("bare number of seconds"),
        "seconds in the man page"
    );
    let help = |args: &[&str]| {
        let out = crate::support::rlock::output(crate::support::rlock::bare().args(args));
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for args in [&["run", "--help"][..], &["acquire", "--help"]] {
        let text = help(args);
        assert!(text.contains("-w 5, -w 0.5"), "{args:?}: {text}");
    }
    let text = help(&["status", "--help"]);
    assert!(text.contains("note"), "{text}");
}

//! The committed completions and man page match what the clap definitions
//! render. To update them: `RLOCK_UPDATE_GENERATED=1 cargo test generated`.

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

/// The environment variables the options read (`env = "RLOCK_..."` in the
/// clap definitions).
fn option_env_vars() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(root.join("src/cli/mod.rs")).unwrap();
    let mut vars: Vec<String> = source
        .split("env = \"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect();
    vars.sort();
    vars.dedup();
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
    for var in option_env_vars() {
        assert!(seen.contains(&format!("[env: {var}]")), "{var} in --help");
        assert!(
            page.contains(&format!("\\fB{var}\\fR environment variable")),
            "{var} in the man page"
        );
        assert!(!page.contains(&format!("{var}=")), "{var}= in the man page");
    }
}

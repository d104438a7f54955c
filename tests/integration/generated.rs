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

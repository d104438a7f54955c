//! The `rlock` binary: parse, run, print one line on failure, exit.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match rlock::cli::parse() {
        Ok(cli) => cli,
        Err(exit) => return exit.into(),
    };
    match rlock::run(cli) {
        Ok(exit) => exit.into(),
        Err(err) => {
            rlock::report(&err);
            err.exit().into()
        }
    }
}

# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_rlock_global_optspecs
    string join \n u/url= prefix= cacert= cert= key= password-file= password-command= connect-timeout= v/verbose q/quiet h/help V/version
end

function __fish_rlock_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_rlock_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_rlock_using_subcommand
    __fish_rlock_after_dashes; and return 1
    set -l cmd (__fish_rlock_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c rlock -n "__fish_rlock_needs_command" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_needs_command" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_needs_command" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_needs_command" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_needs_command" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_needs_command" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_needs_command" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_needs_command" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_needs_command" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_needs_command" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_needs_command" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "run" -d 'Wait for the lock(s), run COMMAND while holding them, release when COMMAND ends'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "acquire" -d 'Take a lock for a shell script and print its owner token on stdout'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "renew" -d 'Extend a hold taken with `acquire` to at least --ttl from now'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "release" -d 'Give up a hold (--token), or break any hold (--force, operators only)'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "status" -d 'Show who holds each lock: holders (host, pid, command, note, held for, ttl, last renewal or how overdue it is) and waiters. Never owner tokens'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "list" -d 'List the locks that are held or waited for (SCAN, never KEYS)'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "check" -d 'Check that the server(s) can keep rlock\'s promises: one line per check'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "history" -d 'Show the lock\'s last events, newest first: acquired, released, lost, busy, forced, max-hold, interrupted, with host, pid, command, fence and how long it waited or held'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "metrics" -d 'Print the locks\' state in Prometheus\' text format (for node_exporter\'s textfile collector or a scrape wrapper)'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c rlock -n "__fish_rlock_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rlock -n "__fish_rlock_using_subcommand run" -s w -l wait -l timeout -d 'Give up after waiting this long for the lock (default: wait forever)' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l note -d 'What this holder is, shown by status and to waiting runs (default: the CI job\'s URL under GitHub Actions, GitLab CI, Jenkins or Buildkite)' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l progress-interval -d 'Off a terminal: print a timestamped line when waiting starts and then this often (who holds the lock, how long we have waited), and one when the lock is acquired; 0: never' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l unreachable-wait -d 'Without --wait: how long to wait for a server that cannot be reached (down, restarting, loading, failing over) before giving up with exit 69' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -s E -l conflict-exit-code -d 'Exit status when the lock was not acquired' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l ttl -d 'Lease length (at least 100ms); `run` renews it while COMMAND runs, every tenth of what a failing renewal has before SIGTERM (1.9s by default: -v says)' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l limit -d 'Semaphore: at most N holders at once, each with its own lease' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l min-replicas -d 'The lock counts only once N replicas have it (WAIT, within --connect-timeout); otherwise it is given back and rlock exits 69' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l history -d 'Keep the lock\'s last N events for `rlock history` (acquired, released, busy, lost, ...); 0 records nothing. A failed write is a -v note' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l lease -d 'Fixed lease without renewal: COMMAND gets SIGTERM --kill-after before it ends and is killed just before it ends (exit 70)' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l max-hold -d 'Stop COMMAND this long after it started, as timeout(1) does: SIGTERM to its process group, SIGKILL --kill-after later; the lock is released and rlock exits 124' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l metrics-file -d 'When the run ends, write its outcome to FILE in Prometheus\' text format (for node_exporter\'s textfile collector), keeping other locks\' series' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand run" -l notify-ready -d 'Under systemd (NOTIFY_SOCKET set), when READY=1 goes out: once the lock is held and COMMAND started (held), or at once (start)' -r -f -a "held\t'Once the lock is held and COMMAND started'
start\t'At once: a waiting standby counts as started'"
complete -c rlock -n "__fish_rlock_using_subcommand run" -l ready-file -d 'A file that exists exactly while the lock is held and COMMAND runs (for a readiness probe): RLOCK_PID=, RLOCK_NAME=, RLOCK_FENCE=, RLOCK_FENCES= and RLOCK_SINCE= lines' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand run" -l ping -d 'Pings a monitor at URL in healthchecks.io\'s protocol (Cronitor and others accept it too): URL/start when the lock is taken, URL/<exit status> after the release, URL/log for a run skipped because the lock was taken, each with the run\'s id (rid=)' -r -f
complete -c rlock -n "__fish_rlock_using_subcommand run" -l kill-after -d 'Grace between SIGTERM and SIGKILL when COMMAND must be stopped [default: 10s, at most a third of the lease]' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l signal-grace -d 'After forwarding SIGINT, SIGTERM or SIGHUP to COMMAND, kill COMMAND\'s process group (SIGKILL) if it still runs this long after the first of them, release the lock, and exit 128+N for that signal N [default: off]' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -s c -l command -d 'Run STRING with `sh -c` instead of a COMMAND after `--` (as flock\'s -c)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand run" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand run" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand run" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand run" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand run" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand run" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand run" -s n -l no-wait -l nonblock -l nb -d 'Give up at once if the lock is taken (same as --wait 0)'
complete -c rlock -n "__fish_rlock_using_subcommand run" -s x -l exclusive -d 'Exclusive lock: one holder at a time (the default; flock\'s -x)'
complete -c rlock -n "__fish_rlock_using_subcommand run" -s s -l shared -d 'Shared (read) lock: many shared holders at once, none beside an exclusive one'
complete -c rlock -n "__fish_rlock_using_subcommand run" -l fair -d 'First come, first served among waiters, across kinds'
complete -c rlock -n "__fish_rlock_using_subcommand run" -l redisson -d 'Store the lock exactly as Redisson\'s getLock(NAME) does (key NAME, no prefix)'
complete -c rlock -n "__fish_rlock_using_subcommand run" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand run" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand run" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s w -l wait -l timeout -d 'Give up after waiting this long for the lock (default: wait forever)' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l note -d 'What this holder is, shown by status and to waiting runs (default: the CI job\'s URL under GitHub Actions, GitLab CI, Jenkins or Buildkite)' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l progress-interval -d 'Off a terminal: print a timestamped line when waiting starts and then this often (who holds the lock, how long we have waited), and one when the lock is acquired; 0: never' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l unreachable-wait -d 'Without --wait: how long to wait for a server that cannot be reached (down, restarting, loading, failing over) before giving up with exit 69' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s E -l conflict-exit-code -d 'Exit status when the lock was not acquired' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l ttl -d 'Lease length (at least 100ms); `run` renews it while COMMAND runs, every tenth of what a failing renewal has before SIGTERM (1.9s by default: -v says)' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l limit -d 'Semaphore: at most N holders at once, each with its own lease' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l min-replicas -d 'The lock counts only once N replicas have it (WAIT, within --connect-timeout); otherwise it is given back and rlock exits 69' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l history -d 'Keep the lock\'s last N events for `rlock history` (acquired, released, busy, lost, ...); 0 records nothing. A failed write is a -v note' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l while-pid -d 'Keep the lock renewed while process PID lives, and release it when PID exits (a small background watchdog; e.g. --while-pid $$ for the calling shell). The watchdog also ends when the lock is released or lost. With file:DIR it is required: the watchdog keeps the lock files open' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s n -l no-wait -l nonblock -l nb -d 'Give up at once if the lock is taken (same as --wait 0)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s x -l exclusive -d 'Exclusive lock: one holder at a time (the default; flock\'s -x)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s s -l shared -d 'Shared (read) lock: many shared holders at once, none beside an exclusive one'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l fair -d 'First come, first served among waiters, across kinds'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -l redisson -d 'Store the lock exactly as Redisson\'s getLock(NAME) does (key NAME, no prefix)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand acquire" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l token -d 'The owner token `rlock acquire` printed [default: $RLOCK_TOKEN]' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l ttl -d 'New lease length, from now' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand renew" -l redisson -d 'The lock is a Redisson lock (as taken with --redisson)'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand renew" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand release" -l token -d 'The owner token `rlock acquire` printed: releases only that hold [default: $RLOCK_TOKEN]' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l history -d 'Keep the lock\'s last N events for `rlock history` (the release, or with --force whose hold was removed); 0 records nothing' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand release" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand release" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand release" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand release" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand release" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand release" -l force -d 'Remove every holder\'s hold, whatever holds the lock (operator break-glass); says on stderr whom it removed (-q: nothing)'
complete -c rlock -n "__fish_rlock_using_subcommand release" -l redisson -d 'The lock is a Redisson lock (as taken with --redisson)'
complete -c rlock -n "__fish_rlock_using_subcommand release" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand release" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand release" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand release" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand status" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand status" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand status" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand status" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand status" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand status" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand status" -l json -d 'One JSON object per lock, one per line'
complete -c rlock -n "__fish_rlock_using_subcommand status" -l check -d 'Print nothing; exit 0 when every NAME is held, 1 when one is free, 69 when it cannot tell (for monitoring scripts)'
complete -c rlock -n "__fish_rlock_using_subcommand status" -l redisson -d 'The locks are stored as Redisson\'s getLock(NAME) stores them (key NAME, no prefix): held by rlock --redisson or a Redisson client. Redisson records no holder details: the thread id, hold count and lease left are shown'
complete -c rlock -n "__fish_rlock_using_subcommand status" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand status" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand status" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand list" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand list" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand list" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand list" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand list" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand list" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand list" -l json -d 'A JSON array of status objects'
complete -c rlock -n "__fish_rlock_using_subcommand list" -l redisson -d 'List the locks stored in Redisson\'s layout (keys matching PATTERN, no prefix) instead of rlock\'s'
complete -c rlock -n "__fish_rlock_using_subcommand list" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand list" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand list" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand check" -l ttl -d 'The --ttl your runs use: the `failover` line says whether their lease rides out the server\'s failover' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l kill-after -d 'The --kill-after your runs use [default: 10s, at most a third of the lease]: a longer one leaves the lease less of an outage to ride out' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand check" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand check" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand check" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand check" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand check" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand check" -l json -d 'One JSON object: {"server": ..., "checks": [{"name", "server", "result", "detail"}]}'
complete -c rlock -n "__fish_rlock_using_subcommand check" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand check" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand check" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand history" -l limit -d 'Show at most N events (1 or more)' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand history" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand history" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand history" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand history" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand history" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand history" -l json -d 'A JSON array of events, newest first'
complete -c rlock -n "__fish_rlock_using_subcommand history" -l redisson -d 'The lock is a Redisson lock (as taken with --redisson)'
complete -c rlock -n "__fish_rlock_using_subcommand history" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand history" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand history" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand history" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand metrics" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand completions" -s u -l url -d 'Redis server URL: redis://[user:password@]host[:port][/db]' -r
complete -c rlock -n "__fish_rlock_using_subcommand completions" -l prefix -d 'Key namespace: a lock NAME lives under the key PREFIX:{NAME}' -r
complete -c rlock -n "__fish_rlock_using_subcommand completions" -l cacert -d 'TLS: CA certificate file (PEM) to trust for rediss:// (and an https:// --ping), instead of the system\'s trust store' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand completions" -l cert -d 'TLS: client certificate file (PEM) for rediss://, with --key' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand completions" -l key -d 'TLS: client private key file (PEM) for rediss://, with --cert' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand completions" -l password-file -d 'Read the password from FILE, again for each new connection (for short-lived tokens used as passwords, such as cloud IAM tokens)' -r -F
complete -c rlock -n "__fish_rlock_using_subcommand completions" -l password-command -d 'Run CMD with `sh -c` for each new connection; the first line it prints is the password (for short-lived tokens from a cloud\'s SDK or CLI, such as ElastiCache IAM or Entra tokens)' -r -f -a "(__fish_complete_command)"
complete -c rlock -n "__fish_rlock_using_subcommand completions" -l connect-timeout -d 'Bound on each connection attempt and each reply; an unreachable or stalled server fails with exit 69 instead of hanging' -r
complete -c rlock -n "__fish_rlock_using_subcommand completions" -s v -l verbose -d 'Log the server(s) used, with the database and prefix, and where that came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each renewal and the release, with timings, on stderr'
complete -c rlock -n "__fish_rlock_using_subcommand completions" -s q -l quiet -d 'Print no diagnostics on stderr (usage errors excepted)'
complete -c rlock -n "__fish_rlock_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rlock -n "__fish_rlock_using_subcommand completions" -s V -l version -d 'Print version'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "run" -d 'Wait for the lock(s), run COMMAND while holding them, release when COMMAND ends'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "acquire" -d 'Take a lock for a shell script and print its owner token on stdout'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "renew" -d 'Extend a hold taken with `acquire` to at least --ttl from now'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "release" -d 'Give up a hold (--token), or break any hold (--force, operators only)'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "status" -d 'Show who holds each lock: holders (host, pid, command, note, held for, ttl, last renewal or how overdue it is) and waiters. Never owner tokens'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "list" -d 'List the locks that are held or waited for (SCAN, never KEYS)'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "check" -d 'Check that the server(s) can keep rlock\'s promises: one line per check'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "history" -d 'Show the lock\'s last events, newest first: acquired, released, lost, busy, forced, max-hold, interrupted, with host, pid, command, fence and how long it waited or held'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "metrics" -d 'Print the locks\' state in Prometheus\' text format (for node_exporter\'s textfile collector or a scrape wrapper)'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c rlock -n "__fish_rlock_using_subcommand help; and not __fish_seen_subcommand_from run acquire renew release status list check history metrics completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'

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

//! Prometheus text read by Prometheus' own Python parser (`prometheus_client`,
//! installed by scripts/test), so the tests check the format, not our reading
//! of it.

use std::io::Write;
use std::process::{Command, Stdio};

/// One parsed sample: metric name, labels, value.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

const PARSE: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = "\x1e".join(k + "\x1f" + v for k, v in sorted(s.labels.items()))
        print(s.name + "\t" + repr(float(s.value)) + "\t" + labels)
"#;

/// Parses `text` with prometheus_client; panics (with the parser's error)
/// when it is not valid exposition text, or when a family's `# TYPE` or
/// `# HELP` appears more than once.
pub fn parse(text: &str) -> Vec<Sample> {
    for kind in ["# TYPE ", "# HELP "] {
        let mut seen = std::collections::HashSet::new();
        for line in text.lines().filter(|l| l.starts_with(kind)) {
            let name = line.split(' ').nth(2).unwrap();
            assert!(seen.insert(name.to_owned()), "{kind}{name} twice:\n{text}");
        }
    }
    let mut child = Command::new("python3")
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("No module named 'prometheus_client'"),
        "prometheus_client is missing: run scripts/test, or pip install prometheus_client==0.21.1"
    );
    assert!(
        out.status.success(),
        "not valid Prometheus text ({err}):\n{text}"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let mut fields = line.splitn(3, '\t');
            let name = fields.next().unwrap().to_owned();
            let value = fields.next().unwrap().parse().unwrap();
            let labels = fields
                .next()
                .unwrap_or("")
                .split('\x1e')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('\x1f').unwrap();
                    (k.to_owned(), v.to_owned())
                })
                .collect();
            Sample {
                name,
                labels,
                value,
            }
        })
        .collect()
}

/// The one sample of `name` for lock `lock`.
pub fn one<'a>(samples: &'a [Sample], name: &str, lock: &str) -> &'a Sample {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && s.label("lock") == Some(lock))
        .collect();
    assert_eq!(found.len(), 1, "{name}{{lock={lock:?}}} in {samples:#?}");
    found[0]
}

//! Every relative link of every tracked Markdown file points at a file or
//! folder that exists (`scripts/docs.sh` runs this beside `cargo doc`, whose
//! `-D warnings` catches broken intra-doc links), and every count the docs
//! take from `scripts/test.sh`'s closing line agrees with the line TESTING.md
//! quotes (`scripts/doc-counts.py` rewrites them from a run's log).

use std::path::{Path, PathBuf};
use std::process::Command;

use regex::Regex;

fn repo() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .canonicalize()
        .unwrap()
}

/// The tracked `*.md` files, relative to the repository; outside a git
/// checkout, every `*.md` file but those of `target/` and hidden folders.
fn markdown_files(repo: &Path) -> Vec<PathBuf> {
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--", "*.md"])
        .current_dir(repo)
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(out) = listed {
        return out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
            .collect();
    }
    let mut found = Vec::new();
    walk(repo, repo, &mut found);
    found
}

fn walk(repo: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                walk(repo, &path, found);
            }
        } else if name.ends_with(".md") {
            found.push(path.strip_prefix(repo).unwrap().to_owned());
        }
    }
}

/// `text` with fenced code blocks and code spans blanked (newlines kept, so
/// byte offsets and line numbers stay those of the file): links there are code.
fn without_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        let opens = marker.len() >= 3 && line.len() - trimmed.len() <= 3;
        match &fence {
            Some(open) if opens && marker.starts_with(open.as_str()) => {
                fence = None;
                out.push_str(&blank(line));
            }
            Some(_) => out.push_str(&blank(line)),
            None if opens => {
                fence = Some(marker);
                out.push_str(&blank(line));
            }
            None => out.push_str(&without_code_spans(line)),
        }
    }
    out
}

/// Spaces for every character of `s` but its newline.
fn blank(s: &str) -> String {
    s.chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect()
}

/// `line` with every code span (a run of backticks to the next run of as
/// many) blanked.
fn without_code_spans(line: &str) -> String {
    let ticks = Regex::new("`+").unwrap();
    let mut out = String::new();
    let mut at = 0;
    let mut runs = ticks.find_iter(line).peekable();
    while let Some(open) = runs.next() {
        let close = runs.find(|r| r.len() == open.len());
        let Some(close) = close else { break };
        out.push_str(&line[at..open.start()]);
        out.push_str(&blank(&line[open.start()..close.end()]));
        at = close.end();
    }
    out.push_str(&line[at..]);
    out
}

/// The link targets of a Markdown text, each with its line: inline links and
/// images, reference definitions, and HTML `href`/`src`.
fn links(text: &str) -> Vec<(usize, String)> {
    let patterns = [
        r#"!?\[[^\]]*\]\(\s*<([^>]*)>"#,
        r#"!?\[[^\]]*\]\(\s*([^)\s<][^)\s]*)"#,
        r#"(?m)^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)"#,
        r#"(?:href|src)="([^"]+)""#,
    ];
    let text = without_code(text);
    let mut found = Vec::new();
    for pattern in patterns {
        for c in Regex::new(pattern).unwrap().captures_iter(&text) {
            let target = c.get(1).unwrap();
            let line = text[..target.start()].matches('\n').count() + 1;
            found.push((line, target.as_str().to_owned()));
        }
    }
    found.sort();
    found
}

/// The file a relative link points at, from the Markdown file `from`; None for
/// a link elsewhere (a URL, mail) or within the page (`#part`).
fn local_target(repo: &Path, from: &Path, target: &str) -> Option<PathBuf> {
    let external = target.starts_with('#')
        || target.starts_with("//")
        || target
            .split_once(':')
            .is_some_and(|(scheme, _)| !scheme.is_empty() && !scheme.contains('/'));
    if external {
        return None;
    }
    let path = target.split(['#', '?']).next().unwrap_or("");
    let path = path.replace("%20", " ");
    Some(match path.strip_prefix('/') {
        Some(rooted) => repo.join(rooted),
        None => repo.join(from).parent().unwrap().join(path),
    })
}

#[test]
fn markdown_links_point_at_files_that_exist() {
    let repo = repo();
    let files = markdown_files(&repo);
    assert!(files.len() >= 10, "only {} Markdown files", files.len());
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(repo.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (line, target) in links(&text) {
            if let Some(path) = local_target(&repo, file, &target) {
                if !path.exists() {
                    broken.push(format!(
                        "{}:{line}: `{target}` is not there",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn links_are_found_outside_code_only() {
    let text = "\
See [the cases](cases/README.md) and ![chart](a.svg \"t\").
`[not a link](x.md)` and ``[nor](y.md)``
```
[in a block](z.md)
```
[ref]: docs/x.md#part
<a href=\"h.md\">h</a> [web](https://example.com) [here](#top) [wrapped
text](w.md)
";
    let found: Vec<String> = links(text)
        .into_iter()
        .map(|(l, t)| format!("{l} {t}"))
        .collect();
    assert_eq!(
        found,
        [
            "1 a.svg",
            "1 cases/README.md",
            "6 docs/x.md#part",
            "7 #top",
            "7 h.md",
            "7 https://example.com",
            "8 w.md"
        ]
    );
    let repo = Path::new("/r");
    let from = Path::new("cases/README.md");
    assert_eq!(local_target(repo, from, "https://example.com"), None);
    assert_eq!(local_target(repo, from, "#top"), None);
    assert_eq!(
        local_target(repo, from, "../runner/README.md#commands"),
        Some(PathBuf::from("/r/cases/../runner/README.md"))
    );
    assert_eq!(
        local_target(repo, from, "/TESTING.md"),
        Some(PathBuf::from("/r/TESTING.md"))
    );
}

/// Runs `scripts/doc-counts.py --check` with `args`: exit status and output.
fn doc_counts(args: &[&str]) -> (bool, String) {
    let out = Command::new("python3")
        .arg(repo().join("scripts/doc-counts.py"))
        .arg("--check")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("python3 runs scripts/doc-counts.py");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Every count the docs take from `scripts/test.sh`'s closing line agrees with
/// the line TESTING.md quotes: the docs are of that run, not of the live
/// cases (which others add to after it), so main stays green until the next
/// run is quoted.
#[test]
fn doc_counts_agree_with_the_quoted_closing_line() {
    let (ok, text) = doc_counts(&[]);
    assert!(ok, "{text}");
}

/// A count that disagrees is named with its file and line.
#[test]
fn a_count_that_disagrees_is_named_with_its_line() {
    let testing = std::fs::read_to_string(repo().join("TESTING.md")).unwrap();
    let quoted = testing
        .lines()
        .find(|l| l.starts_with("scripts/test.sh: "))
        .expect("TESTING.md quotes a closing line");
    let found = Regex::new(r"21\.0\.0: (\d+) passed").unwrap();
    let n: u64 = found.captures(quoted).expect("21.0.0's part")[1]
        .parse()
        .unwrap();
    let line = found.replace(quoted, format!("21.0.0: {} passed", n + 1));
    let (ok, text) = doc_counts(&["--line", &line]);
    assert!(!ok, "{text}");
    let named = Regex::new(&format!(
        r"cases/halide/README\.md:\d+: {n}, expected {}",
        n + 1
    ))
    .unwrap();
    assert!(named.is_match(&text), "{text}");
}

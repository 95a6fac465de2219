//! `vkcopy-suite new`: a short case that passes `check` and runs, with the
//! parts an author edits explained in comments.

use std::io::Write;
use std::path::{Path, PathBuf};

use vkcopy_engine::schema::SCHEMA_FILE;

use crate::error::SuiteError;

/// The file of case `name` (`basic/my_case` or `basic::my_case`) below `root`.
pub fn case_path(root: &Path, name: &str) -> Result<PathBuf, SuiteError> {
    // `cases/basic/x.yaml`, `basic/x.yaml` and `basic/x` name the same case.
    let mut name = name.trim().trim_start_matches("./");
    if let Some(folder) = root.file_name().and_then(|f| f.to_str()) {
        name = name
            .strip_prefix(folder)
            .and_then(|n| n.strip_prefix('/'))
            .unwrap_or(name);
    }
    let name = name
        .strip_suffix(".yaml")
        .unwrap_or(name)
        .replace("::", "/");
    let parts: Vec<&str> = name.split('/').collect();
    let word = |p: &&str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    if parts.len() < 2 || !parts.iter().all(word) {
        return Err(SuiteError::Input(format!(
            "case name '{name}': write FOLDER/NAME (e.g. basic/my_case) in lowercase letters, digits and _"
        )));
    }
    if parts[0] == "devices" {
        let why = "devices/ holds recorded memory tables, not cases";
        return Err(SuiteError::Input(why.into()));
    }
    let mut path = root.to_owned();
    path.extend(&parts);
    path.set_extension("yaml");
    Ok(path)
}

/// The case schema a case written in the folder `dir` of the cases folder
/// `root` points at, as a path relative to `dir`: the nearest `case.schema.json`
/// from `dir` up to `root`, else this repository's. None when neither exists.
pub fn schema_path(root: &Path, dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let root = root.canonicalize().ok()?;
    let own = vkcopy_engine::discover::home()
        .join("cases")
        .join(SCHEMA_FILE);
    let schema = dir
        .ancestors()
        .take_while(|d| d.starts_with(&root))
        .map(|d| d.join(SCHEMA_FILE))
        .find(|f| f.is_file())
        .or_else(|| own.canonicalize().ok())?;
    Some(relative(&dir, &schema))
}

/// `to` as a path from the folder `from`, with `/` between parts (both real paths).
fn relative(from: &Path, to: &Path) -> String {
    let (from, to): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let up = std::iter::repeat_n("..".to_owned(), from.len() - shared);
    let down = to[shared..]
        .iter()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    up.chain(down).collect::<Vec<_>>().join("/")
}

/// The skeleton text of a case whose schema is at `schema` (relative to the
/// case file's folder), if there is one.
pub fn skeleton(schema: Option<&str>, mirrors: Option<&str>) -> String {
    let schema = match schema {
        Some(path) => format!("# yaml-language-server: $schema={path}\n"),
        // An editor then checks nothing; say how to get a schema.
        None => format!(
            "# No {SCHEMA_FILE} found: `vkcopy-suite schema > CASES/{SCHEMA_FILE}` writes one.\n"
        ),
    };
    let mirrors = match mirrors {
        Some(m) => format!("mirrors: {m}   # the Halide test this case mirrors\n"),
        None => {
            "# mirrors: test/correctness/TEST.cpp   # the Halide test this case mirrors, if any\n"
                .to_owned()
        }
    };
    format!(
        r#"{schema}# Fields and steps: cases/REFERENCE.md; ideas: cases/README.md.
about: >
  A 64x32 i32 buffer of x + 64*y goes to device memory and back; the values
  read back come from the device. (Say here what this case checks.)
{mirrors}buffers:
  # Host memory of zeros, not dirty; mins 0, dense strides. Add `min:`,
  # `stride:` or `host: false` for other layouts.
  g: {{ type: i32, extent: [64, 32] }}
steps:
  - fill_host: {{ buffer: g, value: "x + 64*y" }}   # g becomes host-dirty
  - copy_to_device: g                           # allocates, uploads, clears host_dirty
  # Overwrite the host so that the values checked below can only come from
  # the device.
  - fill_host: {{ buffer: g, value: "0" }}
  - set_dirty: {{ buffer: g, host_dirty: false, device_dirty: true }}
  - copy_to_host: g                             # reads back, clears device_dirty
  - expect: {{ buffer: g, value: "x + 64*y" }}
  - expect_flags: {{ buffer: g, host_dirty: false, device_dirty: false, has_device: true }}
# After the last step the runner frees the buffers and checks that nothing the
# case made is still alive (device regions, VkBuffers, VkDeviceMemory,
# mappings, command pools, fences) and that the validation layer said nothing:
# a leak or a validation message fails the case.
"#
    )
}

/// Writes the skeleton of case `name` below `root`; never overwrites.
pub fn write(root: &Path, name: &str, mirrors: Option<&str>) -> Result<PathBuf, SuiteError> {
    let path = case_path(root, name)?;
    if let Some(m) = mirrors.filter(|m| m.trim().is_empty() || m.contains('\n')) {
        let why = format!("--mirrors '{m}': one line naming a Halide test");
        return Err(SuiteError::Input(why));
    }
    let dir = path.parent().unwrap_or(root);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| SuiteError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let schema = schema_path(root, dir);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => SuiteError::Exists { path: path.clone() },
            _ => io(&path)(e),
        })?;
    file.write_all(skeleton(schema.as_deref(), mirrors).as_bytes())
        .map_err(io(&path))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_files() {
        let root = Path::new("/c");
        assert_eq!(
            case_path(root, "basic/my_case").unwrap(),
            Path::new("/c/basic/my_case.yaml")
        );
        assert_eq!(
            case_path(root, "halide::gpu_x.yaml").unwrap(),
            Path::new("/c/halide/gpu_x.yaml")
        );
        let cases = Path::new("/r/cases");
        for name in [
            "cases/basic/x.yaml",
            "basic/x.yaml",
            "basic/x",
            "./cases/basic/x",
        ] {
            assert_eq!(
                case_path(cases, name).unwrap(),
                Path::new("/r/cases/basic/x.yaml"),
                "{name}"
            );
        }
        assert!(case_path(root, "my_case").is_err());
        assert!(case_path(root, "basic/../x").is_err());
        assert!(case_path(root, "devices/x").is_err());
        assert!(case_path(root, "Basic/x").is_err());
    }

    #[test]
    fn skeleton_points_at_the_schema_and_parses() {
        let root = vkcopy_engine::discover::cases_root();
        let schema = schema_path(&root, &root.join("basic"));
        assert_eq!(schema.as_deref(), Some("../case.schema.json"));
        let text = skeleton(schema.as_deref(), Some("test/correctness/device_crop.cpp"));
        assert!(text.starts_with("# yaml-language-server: $schema=../case.schema.json\n"));
        let plan = vkcopy_engine::plan::parse(&root, &root.join("basic/new.yaml"), &text).unwrap();
        assert_eq!(
            plan.mirrors.as_deref(),
            Some("test/correctness/device_crop.cpp")
        );
    }
}

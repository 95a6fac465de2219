//! The kernel blob that Halide's Vulkan codegen (19 and 21,
//! `CodeGen_Vulkan_Dev`) embeds in a pipeline, in 32-bit words:
//!
//! - the number of kernels; per kernel its SPIR-V module's size in bytes and
//!   its name (a word count, then the NUL-padded bytes); then the modules;
//! - each module: a header whose first word is its own length in words, then
//!   the number of entry points and, per entry point, its name, its uniform
//!   and storage buffer counts, its specialization constants (name, id, size),
//!   its shared memory allocations (name, constant id or 0, element size,
//!   element count) and the constant ids of its workgroup size (0: fixed);
//!   after the header, the SPIR-V.
//!
//! Entry point `n` of a module uses descriptor set `n`: binding 0 is a uniform
//! buffer of the scalar arguments when it has one, then one storage buffer
//! per buffer argument.

/// A specialization constant an entry point declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SpecConstant {
    pub(crate) name: String,
    pub(crate) id: u32,
    pub(crate) bytes: u32,
}

/// A workgroup-shared array of an entry point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharedArray {
    pub(crate) name: String,
    /// The specialization constant that sizes it; 0 when its size is fixed.
    pub(crate) constant_id: u32,
    pub(crate) elem_bytes: u32,
    pub(crate) elems: u32,
}

/// One entry point of a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) uniform_buffers: u32,
    pub(crate) storage_buffers: u32,
    pub(crate) constants: Vec<SpecConstant>,
    pub(crate) shared: Vec<SharedArray>,
    /// Constant ids of the workgroup size in x, y, z (0: fixed in the SPIR-V).
    pub(crate) local_size_ids: [u32; 3],
}

/// One SPIR-V module and its entry points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Module {
    pub(crate) entries: Vec<Entry>,
    pub(crate) spirv: Vec<u32>,
}

/// Reads words with bounds checks; every error names the word it stopped at.
struct Words<'a> {
    w: &'a [u32],
    at: usize,
    what: &'static str,
}

impl<'a> Words<'a> {
    fn next(&mut self) -> Result<u32, String> {
        let v = *self.w.get(self.at).ok_or_else(|| {
            format!(
                "{}: ends at word {} where more was expected",
                self.what, self.at
            )
        })?;
        self.at += 1;
        Ok(v)
    }

    /// A count that must fit in what is left (each item takes at least a word).
    fn count(&mut self, of: &str) -> Result<usize, String> {
        let n = self.next()? as usize;
        if n > self.w.len() - self.at {
            return Err(format!(
                "{}: {n} {of} at word {} is more than the blob holds",
                self.what,
                self.at - 1
            ));
        }
        Ok(n)
    }

    /// A word count, then that many words of NUL-padded text.
    fn string(&mut self) -> Result<String, String> {
        let n = self.count("words of a name")?;
        let bytes: Vec<u8> = self.w[self.at..self.at + n]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        self.at += n;
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8(bytes[..end].to_vec())
            .map_err(|_| format!("{}: a name before word {} is not UTF-8", self.what, self.at))
    }
}

fn words(bytes: &[u8], what: &'static str) -> Result<Vec<u32>, String> {
    if !bytes.len().is_multiple_of(4) {
        return Err(format!(
            "{what}: {} bytes, not whole 32-bit words",
            bytes.len()
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The modules of a blob, in order.
pub(crate) fn parse(blob: &[u8]) -> Result<Vec<Module>, String> {
    let w = words(blob, "the kernel blob")?;
    let mut r = Words {
        w: &w,
        at: 0,
        what: "the kernel blob",
    };
    let kernels = r.count("kernels")?;
    let mut sizes = Vec::with_capacity(kernels);
    for _ in 0..kernels {
        let size = r.next()? as usize;
        let _name = r.string()?;
        sizes.push(size);
    }
    let mut byte = r.at * 4;
    let mut modules = Vec::with_capacity(kernels);
    for (k, size) in sizes.into_iter().enumerate() {
        let Some(bytes) = blob.get(byte..byte.saturating_add(size)) else {
            return Err(format!(
                "the kernel blob: module {k} of {size} bytes at byte {byte} runs past its {} bytes",
                blob.len()
            ));
        };
        modules.push(module(bytes)?);
        byte += size;
    }
    Ok(modules)
}

fn module(bytes: &[u8]) -> Result<Module, String> {
    let w = words(bytes, "a kernel module")?;
    let mut r = Words {
        w: &w,
        at: 0,
        what: "a kernel module",
    };
    let header = r.next()? as usize;
    if header < 2 || header > w.len() {
        return Err(format!(
            "a kernel module: a header of {header} words in a module of {}",
            w.len()
        ));
    }
    r.w = &w[..header];
    let count = r.count("entry points")?;
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let name = r.string()?;
        let uniform_buffers = r.next()?;
        let storage_buffers = r.next()?;
        let mut constants = Vec::new();
        for _ in 0..r.count("specialization constants")? {
            constants.push(SpecConstant {
                name: r.string()?,
                id: r.next()?,
                bytes: r.next()?,
            });
        }
        let mut shared = Vec::new();
        for _ in 0..r.count("shared arrays")? {
            shared.push(SharedArray {
                name: r.string()?,
                constant_id: r.next()?,
                elem_bytes: r.next()?,
                elems: r.next()?,
            });
        }
        let local_size_ids = [r.next()?, r.next()?, r.next()?];
        entries.push(Entry {
            name,
            uniform_buffers,
            storage_buffers,
            constants,
            shared,
            local_size_ids,
        });
    }
    let spirv = w[header..].to_vec();
    if spirv.first() != Some(&0x0723_0203) {
        return Err("a kernel module: no SPIR-V after its header (magic number missing)".into());
    }
    Ok(Module { entries, spirv })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Vec<u32> {
        let mut b = s.as_bytes().to_vec();
        b.resize(s.len() / 4 * 4 + 4, 0);
        let mut w = vec![(b.len() / 4) as u32];
        w.extend(
            b.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        w
    }

    /// A blob as Halide 21 lays one out: one kernel, one entry point with a
    /// uniform buffer, two storage buffers, a dynamic workgroup and a
    /// dynamically sized shared array.
    fn blob() -> Vec<u8> {
        let mut m = vec![0u32, 1];
        m.extend(name("f_s0_x"));
        m.extend([1, 2, 1]);
        m.extend(name("shared_mem_size"));
        m.extend([3, 4, 1]);
        m.extend(name("tile"));
        m.extend([3, 4, 0, 0, 1, 2]);
        m[0] = m.len() as u32;
        m.extend([0x0723_0203, 0x0001_0600, 0, 8, 0]);
        let mut out = vec![1u32, (m.len() * 4) as u32];
        out.extend(name("kernel_f"));
        out.extend(m);
        out.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn reads_halide_21_layout() {
        let m = parse(&blob()).unwrap();
        assert_eq!(m.len(), 1);
        let e = &m[0].entries[0];
        assert_eq!(e.name, "f_s0_x");
        assert_eq!((e.uniform_buffers, e.storage_buffers), (1, 2));
        assert_eq!(
            e.constants,
            vec![SpecConstant {
                name: "shared_mem_size".into(),
                id: 3,
                bytes: 4
            }]
        );
        assert_eq!(
            e.shared,
            vec![SharedArray {
                name: "tile".into(),
                constant_id: 3,
                elem_bytes: 4,
                elems: 0
            }]
        );
        assert_eq!(e.local_size_ids, [0, 1, 2]);
        assert_eq!(m[0].spirv, vec![0x0723_0203, 0x0001_0600, 0, 8, 0]);
    }

    #[test]
    fn refuses_truncated_and_garbled_blobs() {
        let b = blob();
        for cut in [0, 3, 4, 12, b.len() - 4] {
            assert!(parse(&b[..cut]).is_err(), "cut at {cut} parsed");
        }
        let mut bad = b.clone();
        bad[0] = 200; // 200 kernels
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("200 kernels"), "{e}");
        let mut no_spirv = b.clone();
        let at = b.len() - 20;
        no_spirv[at] = 0;
        assert!(parse(&no_spirv).unwrap_err().contains("magic"));
    }
}

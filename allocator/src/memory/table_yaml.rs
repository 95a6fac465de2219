//! The YAML form of memory tables (Cargo feature `yaml`), as the module docs of
//! [`table`](super::table) show it.

use std::cell::Cell;
use std::fmt;
use std::path::Path;

use ash::vk;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use super::table::*;

/// `(line, column)` of a known location.
fn place_of(at: Option<Location>) -> Option<(u64, u64)> {
    at.filter(|l| l.line() > 0).map(|l| (l.line(), l.column()))
}

impl Place {
    fn at(origin: &str, at: Option<Location>) -> Self {
        Place::new(origin, place_of(at))
    }
}

impl MemoryTable {
    /// Parses and validates a table in the YAML form of the module docs.
    /// `origin` (usually the file path) starts every error message.
    pub fn from_yaml_str(src: &str, origin: &str) -> Result<Self, TableError> {
        ENTRY.with(|e| e.set(None));
        let raw: RawTable = serde_saphyr::from_str(src).map_err(|err| {
            let entry = ENTRY.with(Cell::take);
            parse_error(origin, &err, entry)
        })?;
        raw.into_table(origin)
    }

    /// Reads, parses and validates a table file; errors name `path`.
    pub fn from_yaml_file(path: &Path) -> Result<Self, TableError> {
        let origin = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|source| TableError::Read {
            origin: origin.clone(),
            source,
        })?;
        Self::from_yaml_str(&src, &origin)
    }

    /// The table in the YAML form of the module docs, with the index of each
    /// type and heap in a comment. [`MemoryTable::from_yaml_str`] reads it back
    /// to an equal table. `source:` and `notes:` are not part of a table and
    /// are not written.
    pub fn to_yaml(&self) -> String {
        use fmt::Write;
        let mut out = String::new();
        let _ = writeln!(out, "name: {}", yaml_quote(&self.name));
        let _ = writeln!(out, "device_type: {}", self.device_type.name());
        let _ = writeln!(
            out,
            "non_coherent_atom_size: {}",
            self.non_coherent_atom_size
        );
        out.push_str("heaps:\n");
        for (i, h) in self.heaps.iter().enumerate() {
            let flags = flag_list(h.flags.as_raw(), &HEAP_FLAGS);
            let budget = h.budget.map_or(String::new(), |b| format!(", budget: {b}"));
            let _ = writeln!(
                out,
                "  - {{ size: {}, flags: {flags}{budget} }}  # heap {i}: {} MiB",
                h.size,
                h.size >> 20
            );
        }
        out.push_str("types:\n");
        for (i, t) in self.types.iter().enumerate() {
            let flags = flag_list(t.flags.as_raw(), &PROPERTY_FLAGS);
            let _ = writeln!(
                out,
                "  - {{ heap: {}, flags: {flags} }}  # type {i}",
                t.heap
            );
        }
        let _ = writeln!(
            out,
            "buffer_memory_type_bits: {:#x}",
            self.buffer_memory_type_bits
        );
        if let Some(d) = self.dedicated_from {
            let _ = writeln!(out, "dedicated_from: {d}");
        }
        out
    }
}

/// A double-quoted YAML scalar.
fn yaml_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---- parsing --------------------------------------------------------------

thread_local! {
    /// The list entry being parsed (`"types[3]"`), left set when parsing fails
    /// inside it so that the error can name it. serde gives no path otherwise.
    static ENTRY: Cell<Option<(&'static str, usize)>> = const { Cell::new(None) };
}

fn parse_error(
    origin: &str,
    err: &serde_saphyr::Error,
    entry: Option<(&'static str, usize)>,
) -> TableError {
    let at = err.location();
    let mut message = err.render_with_options(serde_saphyr::render_options! {
        snippets: serde_saphyr::SnippetMode::Off,
    });
    // The plain rendering ends with " at line L, column C"; the place leads instead.
    if let Some(l) = at {
        let suffix = format!(" at line {}, column {}", l.line(), l.column());
        if let Some(stripped) = message.strip_suffix(&suffix) {
            message = stripped.to_string();
        }
    }
    if let Some((list, index)) = entry {
        message = format!("{list}[{index}]: {message}");
    }
    TableError::Parse {
        at: Place::at(origin, at),
        message,
    }
}

/// The name of the YAML list an entry type sits in, for error messages.
trait Listed {
    const LIST: &'static str;
}

/// A YAML list whose entries, while parsed, are recorded in [`ENTRY`].
struct Entries<T>(Vec<Spanned<T>>);

impl<'de, T: Deserialize<'de> + Listed> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Listed> Visitor<'de> for V<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                loop {
                    ENTRY.with(|e| e.set(Some((T::LIST, items.len()))));
                    // On error the entry stays set for `parse_error`.
                    match seq.next_element::<Spanned<T>>()? {
                        Some(item) => items.push(item),
                        None => break,
                    }
                }
                ENTRY.with(|e| e.set(None));
                Ok(Entries(items))
            }
        }
        d.deserialize_seq(V::<T>(std::marker::PhantomData))
    }
}

/// `buffer_memory_type_bits`: an integer, or a string `0x..` / decimal.
struct TypeBits(u32);

impl<'de> Deserialize<'de> for TypeBits {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TypeBits;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a 32-bit mask, e.g. 31 or 0x1f")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TypeBits, E> {
                u32::try_from(v)
                    .map(TypeBits)
                    .map_err(|_| E::custom(format!("{v:#x} does not fit in 32 bits")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TypeBits, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("{v} is negative")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TypeBits, E> {
                let t = v.trim();
                let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    Some(hex) => u32::from_str_radix(hex, 16),
                    None => t.parse(),
                };
                parsed
                    .map(TypeBits)
                    .map_err(|_| E::custom(format!("`{v}` is not a 32-bit mask such as 0x1f")))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    name: String,
    device_type: DeviceType,
    non_coherent_atom_size: Spanned<u64>,
    heaps: Spanned<Entries<RawHeap>>,
    types: Spanned<Entries<RawType>>,
    #[serde(default)]
    buffer_memory_type_bits: Option<Spanned<TypeBits>>,
    #[serde(default)]
    dedicated_from: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)] // documentation only
    source: Option<String>,
    #[serde(default)]
    #[allow(dead_code)] // documentation only
    notes: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeap {
    size: u64,
    flags: Vec<Spanned<String>>,
    #[serde(default)]
    budget: Option<Spanned<u64>>,
}

impl Listed for RawHeap {
    const LIST: &'static str = "heaps";
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawType {
    heap: Spanned<u32>,
    flags: Vec<Spanned<String>>,
}

impl Listed for RawType {
    const LIST: &'static str = "types";
}

/// Folds named flags into a mask; the error names the entry and the valid names.
fn parse_flags(
    origin: &str,
    entry: &str,
    kind: &str,
    names: &[Spanned<String>],
    table: &[(&str, u32)],
) -> Result<u32, TableError> {
    let mut out = 0;
    let mut seen: Vec<&str> = Vec::new();
    for n in names {
        let Some((name, bit)) = table.iter().find(|(name, _)| *name == n.value) else {
            return Err(TableError::Invalid {
                at: Place::at(origin, Some(n.referenced)),
                message: format!(
                    "{entry}.flags: unknown {kind} flag `{}`; valid names: {}",
                    n.value,
                    valid_names(table)
                ),
            });
        };
        if seen.contains(name) {
            return Err(TableError::Invalid {
                at: Place::at(origin, Some(n.referenced)),
                message: format!("{entry}.flags: {name} is listed twice"),
            });
        }
        seen.push(name);
        out |= bit;
    }
    Ok(out)
}

impl RawTable {
    fn into_table(self, origin: &str) -> Result<MemoryTable, TableError> {
        let mut heaps = Vec::with_capacity(self.heaps.value.0.len());
        for (i, h) in self.heaps.value.0.iter().enumerate() {
            let flags = parse_flags(
                origin,
                &format!("heaps[{i}]"),
                "heap",
                &h.value.flags,
                &HEAP_FLAGS,
            )?;
            let budget = h.value.budget.as_ref();
            if let Some(b) = budget.filter(|b| b.value > h.value.size) {
                return Err(TableError::Invalid {
                    at: Place::at(origin, Some(b.referenced)),
                    message: format!(
                        "heaps[{i}].budget: {} bytes is more than the heap's size ({} bytes)",
                        b.value, h.value.size
                    ),
                });
            }
            heaps.push(MemoryHeap {
                size: h.value.size,
                flags: vk::MemoryHeapFlags::from_raw(flags),
                budget: budget.map(|b| b.value),
            });
        }
        let mut types = Vec::with_capacity(self.types.value.0.len());
        for (i, t) in self.types.value.0.iter().enumerate() {
            let flags = parse_flags(
                origin,
                &format!("types[{i}]"),
                "memory property",
                &t.value.flags,
                &PROPERTY_FLAGS,
            )?;
            types.push(MemoryType {
                heap: t.value.heap.value,
                flags: vk::MemoryPropertyFlags::from_raw(flags),
            });
        }
        let mut table = MemoryTable {
            name: self.name,
            device_type: self.device_type,
            non_coherent_atom_size: self.non_coherent_atom_size.value,
            heaps,
            types,
            buffer_memory_type_bits: 0,
            dedicated_from: self.dedicated_from,
        };
        table.buffer_memory_type_bits = match &self.buffer_memory_type_bits {
            Some(b) => b.value.0,
            None => table.all_type_bits(),
        };
        let locate = |e: Entry| -> Option<Location> {
            Some(match e {
                Entry::Heaps => self.heaps.referenced,
                Entry::Types => self.types.referenced,
                Entry::Type(i) => self.types.value.0.get(i)?.referenced,
                Entry::TypeHeap(i) => self.types.value.0.get(i)?.value.heap.referenced,
                Entry::Atom => self.non_coherent_atom_size.referenced,
                Entry::BufferBits => self.buffer_memory_type_bits.as_ref()?.referenced,
            })
        };
        table.check(origin, &|e| place_of(locate(e)))?;
        Ok(table)
    }
}

/// The flags as a YAML flow list, e.g. `[HOST_VISIBLE, HOST_COHERENT]`.
fn flag_list(raw: u32, table: &[(&str, u32)]) -> String {
    format!("[{}]", flag_names(raw, table).join(", "))
}

fn valid_names(table: &[(&str, u32)]) -> String {
    table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

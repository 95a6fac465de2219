//! Limits of the pooled allocator: block sizes, pool size, block count, and the
//! `VKCOPY_ALLOC_CONFIG` variable that sets them (Halide's `HL_VK_ALLOC_CONFIG`).
//!
//! All sizes are in bytes, except in `VKCOPY_ALLOC_CONFIG`, where the first three
//! fields are in MiB ("MB" in Halide, which multiplies by 1024 * 1024).

#![forbid(unsafe_code)]

use std::env::VarError;

/// One MiB, the unit of the size fields of `VKCOPY_ALLOC_CONFIG`.
pub const MIB: u64 = 1024 * 1024;

/// The environment variable read by [`AllocConfig::from_env`].
pub const ENV_VAR: &str = "VKCOPY_ALLOC_CONFIG";

/// The fields of `VKCOPY_ALLOC_CONFIG` in order, with their units, as error messages name them.
const FIELDS: [&str; 5] = [
    "maximum pool size, MB",
    "minimum block size, MB",
    "maximum block size, MB",
    "maximum block count",
    "nearest multiple, bytes",
];

/// Limits of the pooled allocator, per memory type. A limit of 0 means none.
///
/// The defaults differ from Halide's code and follow its documentation and VMA:
///
/// | field | default | Halide code | why |
/// |---|---|---|---|
/// | `maximum_pool_size` | 0 (none) | 0 | the heap and `vkAllocateMemory` are the real limit; empty blocks go back on `collect` |
/// | `minimum_block_size` | 32 MiB | 4 KiB | 4 KiB blocks mean one `vkAllocateMemory` per small buffer, against a `maxMemoryAllocationCount` that can be 4096 (the spec minimum, reported by NVIDIA on Windows); 32 MiB is what Halide's `doc/Vulkan.md` still states, and costs at most 32 MiB of slack per memory type in use |
/// | `maximum_block_size` | 256 MiB | 0 (none) | VMA's preferred block size for large heaps; a larger request gets its own (dedicated) block instead of a block that stays mostly empty once it is freed |
/// | `maximum_block_count` | 0 (none) | 0 | as for the pool size |
/// | `nearest_multiple` | 32 B | 32 B | Halide's; region sizes are rounded up to it |
///
/// Blocks on heaps of at most 1 GiB are further capped at 1/8 of the heap, as VMA
/// does (the block pool of each memory type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocConfig {
    /// Bytes of all blocks of one memory type together; 0 = no limit.
    pub maximum_pool_size: u64,
    /// Bytes; a new block is at least this large (unless capped by `maximum_block_size`
    /// or by 1/8 of a small heap), so small buffers share blocks.
    pub minimum_block_size: u64,
    /// Bytes; requests larger than this get a dedicated block of their own size; 0 = no limit.
    pub maximum_block_size: u64,
    /// Blocks of one memory type; 0 = no limit.
    pub maximum_block_count: u32,
    /// Bytes; region sizes (and new block sizes) are rounded up to a multiple of it.
    /// A power of two, or 0 for no rounding.
    pub nearest_multiple: u64,
}

impl Default for AllocConfig {
    /// No pool or count limit, 32 MiB minimum block, 256 MiB maximum block, 32 B multiple.
    /// See the type's documentation for why.
    fn default() -> Self {
        AllocConfig {
            maximum_pool_size: 0,
            minimum_block_size: 32 * MIB,
            maximum_block_size: 256 * MIB,
            maximum_block_count: 0,
            nearest_multiple: 32,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A field of `VKCOPY_ALLOC_CONFIG` is not a whole non-negative number.
    #[error("VKCOPY_ALLOC_CONFIG field {field} ({name}): '{value}' is not a number")]
    NotANumber {
        /// 1-based field number.
        field: usize,
        /// Field name and unit.
        name: &'static str,
        /// The field's text.
        value: String,
    },
    /// A field of `VKCOPY_ALLOC_CONFIG` does not fit: more than 2^64 bytes, or a
    /// block count above 2^32 - 1.
    #[error("VKCOPY_ALLOC_CONFIG field {field} ({name}): '{value}' is too large")]
    TooLarge {
        /// 1-based field number.
        field: usize,
        /// Field name and unit.
        name: &'static str,
        /// The field's text.
        value: String,
    },
    /// `VKCOPY_ALLOC_CONFIG` has more than five fields.
    #[error(
        "VKCOPY_ALLOC_CONFIG has {count} fields, at most 5: maximum pool size MB : \
         minimum block size MB : maximum block size MB : maximum block count : nearest multiple bytes"
    )]
    TooManyFields {
        /// Fields found.
        count: usize,
    },
    /// The minimum block size is above a (non-zero) maximum block size.
    #[error(
        "minimum block size ({minimum} B) is above maximum block size ({maximum} B); \
         raise the maximum, or set it to 0 for none"
    )]
    MinimumAboveMaximum {
        /// Bytes.
        minimum: u64,
        /// Bytes.
        maximum: u64,
    },
    /// `nearest_multiple` is neither 0 nor a power of two.
    #[error("nearest multiple ({0} B) is not a power of two (or 0 for none)")]
    NearestMultipleNotPowerOfTwo(u64),
    /// `VKCOPY_ALLOC_CONFIG` is set but not valid Unicode.
    #[error("VKCOPY_ALLOC_CONFIG is not valid Unicode")]
    NotUnicode,
}

impl AllocConfig {
    /// A builder starting from [`AllocConfig::default`].
    pub fn builder() -> AllocConfigBuilder {
        AllocConfigBuilder::default()
    }

    /// Checks that a non-zero maximum block size is at least the minimum, and that
    /// `nearest_multiple` is 0 or a power of two.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.maximum_block_size != 0 && self.minimum_block_size > self.maximum_block_size {
            return Err(ConfigError::MinimumAboveMaximum {
                minimum: self.minimum_block_size,
                maximum: self.maximum_block_size,
            });
        }
        if self.nearest_multiple != 0 && !self.nearest_multiple.is_power_of_two() {
            return Err(ConfigError::NearestMultipleNotPowerOfTwo(
                self.nearest_multiple,
            ));
        }
        Ok(())
    }

    /// The text [`AllocConfig::parse`] reads back as this configuration, if
    /// its sizes are whole MiB (the unit of the variable).
    pub fn setting(&self) -> Result<String, String> {
        let mib = |b: u64, what: &str| {
            b.is_multiple_of(MIB)
                .then_some(b / MIB)
                .ok_or_else(|| format!("a {what} of {b} bytes, not whole MiB"))
        };
        Ok(format!(
            "{}:{}:{}:{}:{}",
            mib(self.maximum_pool_size, "maximum pool size")?,
            mib(self.minimum_block_size, "minimum block size")?,
            mib(self.maximum_block_size, "maximum block size")?,
            self.maximum_block_count,
            self.nearest_multiple
        ))
    }

    /// Parses `VKCOPY_ALLOC_CONFIG`: the five fields of Halide's `HL_VK_ALLOC_CONFIG`,
    /// in its order, separated by `:` (or `;`, Halide's separator on Windows):
    ///
    /// `maximum pool size MiB : minimum block size MiB : maximum block size MiB : maximum block count : nearest multiple bytes`
    ///
    /// Fields may be left empty or left out at the end; they keep the default. 0 means
    /// "no limit" as in Halide (for the minimum block size: blocks as small as the request).
    /// Surrounding spaces are ignored. The result is validated as by [`AllocConfig::validate`].
    pub fn parse(s: &str) -> Result<AllocConfig, ConfigError> {
        let mut config = AllocConfig::default();
        if s.trim().is_empty() {
            return Ok(config);
        }
        let fields: Vec<&str> = s.split([':', ';']).map(str::trim).collect();
        if fields.len() > FIELDS.len() {
            return Err(ConfigError::TooManyFields {
                count: fields.len(),
            });
        }
        for (i, value) in fields.iter().enumerate() {
            if value.is_empty() {
                continue;
            }
            let field = i + 1;
            let name = FIELDS[i];
            let number: u64 = match value.parse::<u64>() {
                Ok(n) => n,
                // All digits but no u64: too large rather than not a number.
                Err(_) if value.bytes().all(|b| b.is_ascii_digit()) => {
                    return Err(ConfigError::TooLarge {
                        field,
                        name,
                        value: value.to_string(),
                    })
                }
                Err(_) => {
                    return Err(ConfigError::NotANumber {
                        field,
                        name,
                        value: value.to_string(),
                    })
                }
            };
            let too_large = || ConfigError::TooLarge {
                field,
                name,
                value: value.to_string(),
            };
            let mib = || number.checked_mul(MIB).ok_or_else(too_large);
            match field {
                1 => config.maximum_pool_size = mib()?,
                2 => config.minimum_block_size = mib()?,
                3 => config.maximum_block_size = mib()?,
                4 => config.maximum_block_count = u32::try_from(number).map_err(|_| too_large())?,
                _ => config.nearest_multiple = number,
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// Reads `VKCOPY_ALLOC_CONFIG` (see [`AllocConfig::parse`]); the default when unset.
    pub fn from_env() -> Result<AllocConfig, ConfigError> {
        Self::from_var(std::env::var(ENV_VAR))
    }

    fn from_var(var: Result<String, VarError>) -> Result<AllocConfig, ConfigError> {
        match var {
            Ok(s) => Self::parse(&s),
            Err(VarError::NotPresent) => Ok(AllocConfig::default()),
            Err(VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode),
        }
    }
}

/// Builds an [`AllocConfig`] from the defaults; [`build`](AllocConfigBuilder::build) validates.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocConfigBuilder {
    config: AllocConfig,
}

impl AllocConfigBuilder {
    /// Bytes of all blocks of one memory type; 0 = no limit.
    pub fn with_maximum_pool_size(mut self, bytes: u64) -> Self {
        self.config.maximum_pool_size = bytes;
        self
    }

    /// Bytes; the smallest new block.
    pub fn with_minimum_block_size(mut self, bytes: u64) -> Self {
        self.config.minimum_block_size = bytes;
        self
    }

    /// Bytes; larger requests get a dedicated block; 0 = no limit.
    pub fn with_maximum_block_size(mut self, bytes: u64) -> Self {
        self.config.maximum_block_size = bytes;
        self
    }

    /// Blocks of one memory type; 0 = no limit.
    pub fn with_maximum_block_count(mut self, count: u32) -> Self {
        self.config.maximum_block_count = count;
        self
    }

    /// Bytes, a power of two; 0 = no rounding.
    pub fn with_nearest_multiple(mut self, bytes: u64) -> Self {
        self.config.nearest_multiple = bytes;
        self
    }

    /// The configuration, if it passes [`AllocConfig::validate`].
    pub fn build(self) -> Result<AllocConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_values() {
        let c = AllocConfig::default();
        assert_eq!(c.maximum_pool_size, 0);
        assert_eq!(c.minimum_block_size, 32 * 1024 * 1024);
        assert_eq!(c.maximum_block_size, 256 * 1024 * 1024);
        assert_eq!(c.maximum_block_count, 0);
        assert_eq!(c.nearest_multiple, 32);
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn parse_all_fields() {
        assert_eq!(
            AllocConfig::parse("0:32:256:0:32"),
            Ok(AllocConfig::default())
        );
        assert_eq!(
            AllocConfig::parse("1024:4:64:100:64"),
            Ok(AllocConfig {
                maximum_pool_size: 1024 * MIB,
                minimum_block_size: 4 * MIB,
                maximum_block_size: 64 * MIB,
                maximum_block_count: 100,
                nearest_multiple: 64,
            })
        );
        // Halide's Windows separator, and spaces.
        assert_eq!(
            AllocConfig::parse(" 8 ; 1 ;2;3; 0 "),
            Ok(AllocConfig {
                maximum_pool_size: 8 * MIB,
                minimum_block_size: MIB,
                maximum_block_size: 2 * MIB,
                maximum_block_count: 3,
                nearest_multiple: 0,
            })
        );
    }

    #[test]
    fn parse_empty_and_missing_fields_keep_defaults() {
        let d = AllocConfig::default();
        assert_eq!(AllocConfig::parse(""), Ok(d));
        assert_eq!(AllocConfig::parse("  "), Ok(d));
        assert_eq!(AllocConfig::parse("::::"), Ok(d));
        assert_eq!(
            AllocConfig::parse("::128"),
            Ok(AllocConfig {
                maximum_block_size: 128 * MIB,
                ..d
            })
        );
        assert_eq!(
            AllocConfig::parse("512"),
            Ok(AllocConfig {
                maximum_pool_size: 512 * MIB,
                ..d
            })
        );
        assert_eq!(
            AllocConfig::parse(":::7:"),
            Ok(AllocConfig {
                maximum_block_count: 7,
                ..d
            })
        );
        // A minimum above the default maximum needs a maximum too (0 = none).
        assert_eq!(
            AllocConfig::parse("0:512:0"),
            Ok(AllocConfig {
                minimum_block_size: 512 * MIB,
                maximum_block_size: 0,
                ..d
            })
        );
    }

    #[test]
    fn parse_malformed_fields_name_the_field() {
        let e = AllocConfig::parse("0:x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "VKCOPY_ALLOC_CONFIG field 2 (minimum block size, MB): 'x' is not a number"
        );
        let e = AllocConfig::parse("0:32:256:-1").unwrap_err();
        assert_eq!(
            e,
            ConfigError::NotANumber {
                field: 4,
                name: "maximum block count",
                value: "-1".into()
            }
        );
        let e = AllocConfig::parse("1.5").unwrap_err();
        assert_eq!(
            e.to_string(),
            "VKCOPY_ALLOC_CONFIG field 1 (maximum pool size, MB): '1.5' is not a number"
        );
        let e = AllocConfig::parse("::: :32B").unwrap_err();
        assert_eq!(
            e.to_string(),
            "VKCOPY_ALLOC_CONFIG field 5 (nearest multiple, bytes): '32B' is not a number"
        );
        // 2^44 MiB = 2^64 bytes does not fit.
        let e = AllocConfig::parse("17592186044416").unwrap_err();
        assert_eq!(
            e.to_string(),
            "VKCOPY_ALLOC_CONFIG field 1 (maximum pool size, MB): '17592186044416' is too large"
        );
        // One less does.
        assert_eq!(
            AllocConfig::parse("17592186044415").map(|c| c.maximum_pool_size),
            Ok(17592186044415 * MIB)
        );
        let e = AllocConfig::parse(":::4294967296").unwrap_err();
        assert_eq!(
            e,
            ConfigError::TooLarge {
                field: 4,
                name: "maximum block count",
                value: "4294967296".into()
            }
        );
        let e = AllocConfig::parse("::::99999999999999999999").unwrap_err();
        assert!(matches!(e, ConfigError::TooLarge { field: 5, .. }), "{e}");
    }

    #[test]
    fn parse_too_many_fields() {
        let e = AllocConfig::parse("0:32:256:0:32:0").unwrap_err();
        assert_eq!(e, ConfigError::TooManyFields { count: 6 });
        assert!(e
            .to_string()
            .starts_with("VKCOPY_ALLOC_CONFIG has 6 fields, at most 5"));
        assert_eq!(
            AllocConfig::parse("0:32:256:0:32:"),
            Err(ConfigError::TooManyFields { count: 6 })
        );
    }

    #[test]
    fn parse_validates() {
        assert_eq!(
            AllocConfig::parse("0:512"),
            Err(ConfigError::MinimumAboveMaximum {
                minimum: 512 * MIB,
                maximum: 256 * MIB
            })
        );
        assert_eq!(
            AllocConfig::parse("::::48"),
            Err(ConfigError::NearestMultipleNotPowerOfTwo(48))
        );
    }

    #[test]
    fn builder_validates() {
        assert_eq!(AllocConfig::builder().build(), Ok(AllocConfig::default()));
        let c = AllocConfig::builder()
            .with_maximum_pool_size(MIB)
            .with_minimum_block_size(4096)
            .with_maximum_block_size(65536)
            .with_maximum_block_count(9)
            .with_nearest_multiple(256)
            .build()
            .unwrap();
        assert_eq!(
            c,
            AllocConfig {
                maximum_pool_size: MIB,
                minimum_block_size: 4096,
                maximum_block_size: 65536,
                maximum_block_count: 9,
                nearest_multiple: 256,
            }
        );
        let e = AllocConfig::builder()
            .with_minimum_block_size(2 * MIB)
            .with_maximum_block_size(MIB)
            .build()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "minimum block size (2097152 B) is above maximum block size (1048576 B); \
             raise the maximum, or set it to 0 for none"
        );
        // Equal is fine; a maximum of 0 is no maximum.
        assert!(AllocConfig::builder()
            .with_minimum_block_size(MIB)
            .with_maximum_block_size(MIB)
            .build()
            .is_ok());
        assert!(AllocConfig::builder()
            .with_minimum_block_size(u64::MAX)
            .with_maximum_block_size(0)
            .build()
            .is_ok());
        assert_eq!(
            AllocConfig::builder().with_nearest_multiple(48).build(),
            Err(ConfigError::NearestMultipleNotPowerOfTwo(48))
        );
        assert_eq!(
            AllocConfig::builder()
                .with_nearest_multiple(0)
                .build()
                .map(|c| c.nearest_multiple),
            Ok(0)
        );
    }

    #[test]
    fn from_var() {
        assert_eq!(
            AllocConfig::from_var(Err(VarError::NotPresent)),
            Ok(AllocConfig::default())
        );
        assert_eq!(
            AllocConfig::from_var(Err(VarError::NotUnicode("\u{fffd}".into()))),
            Err(ConfigError::NotUnicode)
        );
        assert_eq!(
            AllocConfig::from_var(Ok("0:64".into())).map(|c| c.minimum_block_size),
            Ok(64 * MIB)
        );
        assert!(AllocConfig::from_var(Ok("0:y".into())).is_err());
    }

    #[test]
    fn from_env_reads_the_variable() {
        // No other unit test reads this variable.
        std::env::set_var(ENV_VAR, "0:48");
        let read = AllocConfig::from_env();
        std::env::remove_var(ENV_VAR);
        assert_eq!(read.map(|c| c.minimum_block_size), Ok(48 * MIB));
        assert_eq!(AllocConfig::from_env(), Ok(AllocConfig::default()));
    }
}

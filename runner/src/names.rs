//! Name tables from serde: an enum's names are the ones its `Deserialize`
//! derive knows, so the suite never writes a table of names by hand.

use serde::de::value::{Error as ValueError, StrDeserializer};
use serde::de::{self, Deserialize, DeserializeOwned, IntoDeserializer, Visitor};
use serde::Serialize;

/// The names serde gives the variants of enum `T`, in declaration order.
pub fn variants<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut probe = Probe(None);
    let _ = T::deserialize(&mut probe);
    probe.0.unwrap_or(&[])
}

/// The variant of unit enum `T` named `s`, if there is one.
pub fn parse<T: DeserializeOwned>(s: &str) -> Option<T> {
    let d: StrDeserializer<'_, ValueError> = s.into_deserializer();
    T::deserialize(d).ok()
}

/// The serde name of a unit variant.
pub fn name<T: Serialize + DeserializeOwned>(v: &T) -> &'static str {
    let written = serde_json::to_value(v).ok();
    let written = written.as_ref().and_then(|w| w.as_str()).unwrap_or("");
    variants::<T>()
        .iter()
        .find(|n| **n == written)
        .copied()
        .unwrap_or("?")
}

/// A deserializer that only records the variant names it is asked for.
struct Probe(Option<&'static [&'static str]>);

impl<'de> de::Deserializer<'de> for &mut Probe {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, ValueError> {
        Err(de::Error::custom("not an enum"))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, ValueError> {
        self.0 = Some(variants);
        Err(de::Error::custom("names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Colour {
        DarkRed,
        Blue,
    }

    #[test]
    fn names_come_from_serde() {
        assert_eq!(variants::<Colour>(), ["dark_red", "blue"]);
        assert_eq!(parse::<Colour>("dark_red"), Some(Colour::DarkRed));
        assert_eq!(parse::<Colour>("green"), None);
        assert_eq!(name(&Colour::Blue), "blue");
    }
}

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

/// Edit distance of `a` and `b` counting a swap of two neighbours as one edit
/// (optimal string alignment), for "did you mean" hints.
pub fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The names of `known` that `name` is most likely a misspelling of: the
/// closest within a third of its length (at least 2 edits), else those that
/// share its first word (`copy_` of `copy_everything`); empty when none fits.
pub fn suggest(name: &str, known: &[&'static str]) -> Vec<&'static str> {
    let limit = (name.chars().count() / 3).max(2);
    let best = known.iter().map(|k| distance(name, k)).min();
    if let Some(best) = best.filter(|&b| b <= limit) {
        return known
            .iter()
            .copied()
            .filter(|k| distance(name, k) == best)
            .collect();
    }
    match name.split_once('_') {
        Some((first, _)) if !first.is_empty() => known
            .iter()
            .copied()
            .filter(|k| k.split('_').next() == Some(first))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod suggest_tests {
    use super::{distance, suggest};

    #[test]
    fn distance_counts_a_swap_as_one_edit() {
        assert_eq!(distance("fill_devcie", "fill_device"), 1);
        assert_eq!(distance("crop", "crop"), 0);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("abc", "xyz"), 3);
        assert_eq!(distance("abcd", "bacd"), 1);
    }

    #[test]
    fn suggests_the_closest_or_the_same_first_word() {
        let known = [
            "fill_device",
            "fill_host",
            "copy_to_host",
            "copy_to_device",
            "crop",
        ];
        assert_eq!(suggest("fill_devcie", &known), ["fill_device"]);
        assert_eq!(
            suggest("copy_everything", &known),
            ["copy_to_host", "copy_to_device"]
        );
        assert!(suggest("zzz", &known).is_empty());
    }
}

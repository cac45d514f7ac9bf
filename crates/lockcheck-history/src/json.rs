//! JSON as the history spec reads it (v1.1), stricter than `serde_json`'s own
//! reading: a key twice in one object is malformed (serde_json keeps the last, and a
//! second `token` would silently win), and nesting is bounded by `MAX_DEPTH`
//! before any parser recurses into it.

use super::input::MAX_DEPTH;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt;

/// Why a line is not the JSON the spec reads: the field (a dotted path, `line` for
/// the whole line) and the reason in words.
pub type Fault = (Cow<'static, str>, String);

/// The deepest nesting of arrays and objects in `text` (brackets inside strings
/// do not count). Linear, no recursion: safe on any input.
pub fn depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The fields of a line's object, in order, their values left raw. A key twice is
/// malformed, named by the key. Refuses nesting past `MAX_DEPTH` first.
pub fn fields(line: &str) -> Result<Vec<(Cow<'_, str>, &RawValue)>, Fault> {
    let d = depth(line);
    if d > MAX_DEPTH {
        return Err((
            "line".into(),
            format!("nested {d} levels deep, deeper than the {MAX_DEPTH} levels spec v1.1 allows"),
        ));
    }
    let mut dup = None;
    let mut de = serde_json::Deserializer::from_str(line);
    let read = Fields { dup: &mut dup }
        .deserialize(&mut de)
        .and_then(|f| de.end().map(|()| f));
    match read {
        Ok(fields) => Ok(fields),
        Err(_) if dup.is_some() => Err((dup.unwrap_or_default().into(), DUPLICATE.into())),
        Err(_)
            if !line.trim_start().starts_with('{')
                && serde_json::from_str::<de::IgnoredAny>(line).is_ok() =>
        {
            Err(("line".into(), "not a JSON object".into()))
        }
        Err(e) => Err(("line".into(), format!("not valid JSON: {e}"))),
    }
}

const DUPLICATE: &str = "this key appears twice in one object (spec v1.1: malformed)";

/// The value of `field` (named so in a fault), parsed whole: a key twice in any of
/// its objects is malformed, named by its dotted path (`value.token`).
pub fn value(field: &str, raw: &RawValue) -> Result<Value, Fault> {
    let mut dup = None;
    let mut de = serde_json::Deserializer::from_str(raw.get());
    match (Strict { dup: &mut dup }).deserialize(&mut de) {
        Ok(v) => Ok(v),
        Err(_) if dup.is_some() => Err((
            format!("{field}.{}", dup.unwrap_or_default()).into(),
            DUPLICATE.into(),
        )),
        Err(e) => Err((field.to_string().into(), e.to_string())),
    }
}

/// The top-level object as (key, raw value) pairs; `dup` gets a key seen twice.
struct Fields<'d> {
    dup: &'d mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Fields<'_> {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Fields<'_> {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out: Self::Value = Vec::new();
        while let Some(Key(k)) = map.next_key()? {
            let v: &RawValue = map.next_value()?;
            if out.iter().any(|(seen, _)| *seen == k) {
                *self.dup = Some(k.into_owned());
                return Err(de::Error::custom(DUPLICATE));
            }
            out.push((k, v));
        }
        Ok(out)
    }
}

/// A key borrowed where it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A `serde_json::Value` that refuses a key twice in one object; `dup` gets the
/// dotted path of the key, built as the error unwinds.
struct Strict<'d> {
    dup: &'d mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::from(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::from(u))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Number::from_f64(f).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        let mut i = 0usize;
        loop {
            match seq.next_element_seed(Strict {
                dup: &mut *self.dup,
            }) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => return Ok(Value::Array(out)),
                Err(e) => {
                    if let Some(p) = self.dup.as_mut() {
                        *p = format!("{i}.{p}");
                    }
                    return Err(e);
                }
            }
            i += 1;
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(Key(k)) = map.next_key()? {
            let v = match map.next_value_seed(Strict {
                dup: &mut *self.dup,
            }) {
                Ok(v) => v,
                Err(e) => {
                    if let Some(p) = self.dup.as_mut() {
                        *p = format!("{k}.{p}");
                    }
                    return Err(e);
                }
            };
            if out.contains_key(k.as_ref()) {
                *self.dup = Some(k.into_owned());
                return Err(de::Error::custom(DUPLICATE));
            }
            out.insert(k.into_owned(), v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(depth(r#"{"a":[1,{"b":"[[[{"}]}"#), 3);
        assert_eq!(depth(r#"{"a":"\"[["}"#), 1);
        assert_eq!(depth("1"), 0);
    }

    #[test]
    fn a_key_twice_is_named_by_its_path() {
        let e = fields(r#"{"index":1,"index":2}"#).unwrap_err();
        assert_eq!(e.0, "index");
        let f = fields(r#"{"a":1,"value":{"x":[{"t":1,"t":2}]}}"#).unwrap();
        let e = value("value", f[1].1).unwrap_err();
        assert_eq!(e.0, "value.x.0.t");
        // The same key spelled with an escape is the same key.
        let f = fields(r#"{"v":{"token":1,"tok\u0065n":2}}"#).unwrap();
        assert_eq!(value("v", f[0].1).unwrap_err().0, "v.token");
        assert_eq!(
            value(
                "v",
                fields(r#"{"v":{"a":{"b":1},"c":[1,{"b":2}]}}"#).unwrap()[0].1
            )
            .unwrap(),
            serde_json::json!({"a":{"b":1},"c":[1,{"b":2}]})
        );
    }

    #[test]
    fn nesting_is_bounded_at_the_spec_limit() {
        let nest = |n: usize| format!("{{\"v\":{}1{}}}", "[".repeat(n - 1), "]".repeat(n - 1));
        let ok = nest(MAX_DEPTH);
        let f = fields(&ok).unwrap();
        value("v", f[0].1).unwrap();
        let e = fields(&nest(MAX_DEPTH + 1)).unwrap_err();
        assert!(e.1.contains("deeper than the 128 levels"), "{e:?}");
    }
}

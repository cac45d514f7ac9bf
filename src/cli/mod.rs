//! One file per subcommand. Each has `Args` (clap) and `main(Args) -> Result<u8>`,
//! the process exit code (`crate::exit`: 0 valid, 1 anomalies, 2 usage, 3 unknown,
//! 4 malformed input, 5 environment problem, 6 internal); what each means for each
//! subcommand is `exit_codes`'s table.

pub mod analyze;
pub mod audit;
pub mod bench;
pub mod check;
pub mod doctor;
pub mod exit_codes;
#[cfg(feature = "docker")]
pub mod image;
pub mod recover;
pub mod report;
pub mod run;
pub mod shrink;
pub mod worker;

pub use crate::exit::Exit;
pub use crate::exit::{ENVIRONMENT as EXIT_ENVIRONMENT, MALFORMED as EXIT_MALFORMED};

/// A flag's value parser for a closed set of names (a runtime, a verdict): the
/// library's types know their names (`ALL`, `name`), not the command line, so
/// clap lists and matches them here.
pub fn one_of<T>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: Copy + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(all.iter().map(|&v| name(v))).try_map(
        move |s: String| {
            all.iter()
                .copied()
                .find(|&v| name(v) == s)
                .ok_or("not one of the listed values")
        },
    )
}

/// The exit code for an error: its own where it carries one, 4 for a malformed
/// history (or one the model does not fit), 2 for a resource log given to a
/// model that reads none, else 6: an error nobody classified is not the user's
/// fault ("usage").
pub fn exit_code_of(e: &anyhow::Error) -> u8 {
    use crate::check::choice::CheckError;
    e.chain()
        .find_map(|c| c.downcast_ref::<Exit>().map(|x| x.code))
        .or_else(|| {
            e.chain().find_map(|c| {
                match c.downcast_ref::<CheckError>() {
                    Some(CheckError::ResourceNotRead(_)) => Some(crate::exit::USAGE),
                    Some(_) => Some(EXIT_MALFORMED),
                    None => None,
                }
                .or_else(|| {
                    c.downcast_ref::<crate::history::HistoryError>()
                        .map(|_| EXIT_MALFORMED)
                })
            })
        })
        .unwrap_or(crate::exit::INTERNAL)
}

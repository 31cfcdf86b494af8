//! Hash commands (Redis's t_hash.c).

use crate::table::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];

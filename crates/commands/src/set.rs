//! Set commands (Redis's t_set.c).

use crate::table::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];

//! List commands (Redis's t_list.c).

use crate::table::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];

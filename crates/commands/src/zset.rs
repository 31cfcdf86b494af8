//! Sorted-set commands (Redis's t_zset.c).

use crate::table::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];

//! Command names by id, for the state that records a command by its id (a client's last command,
//! CLIENT LIST `cmd=`) and must name it without depending on the command table's types. The
//! process's table installs them once (`table::set_process`).

use std::sync::OnceLock;

static NAMES: OnceLock<Box<[&'static str]>> = OnceLock::new();

/// Installs the names of the process's command table, by id; the first installed stay.
pub fn install(names: Box<[&'static str]>) {
    let _ = NAMES.set(names);
}

/// The name of command `id`, if a table is installed and has it.
pub fn name(id: usize) -> Option<&'static str> {
    NAMES.get()?.get(id).copied()
}

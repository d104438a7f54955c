//! The service manager's notification socket (sd_notify(3)'s protocol, with
//! no library): one datagram of `KEY=VALUE` lines per message, sent to the
//! socket `$NOTIFY_SOCKET` names, a path or (`@name`) an abstract address.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// An unbound datagram socket and the address of systemd's socket.
pub struct NotifySocket {
    socket: UnixDatagram,
    to: SocketAddr,
}

impl NotifySocket {
    /// Opens a socket towards `name` (the value of `$NOTIFY_SOCKET`); nothing
    /// is sent yet.
    pub fn open(name: &str) -> io::Result<Self> {
        let to = match name.strip_prefix('@') {
            Some(abstract_name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(abstract_name.as_bytes())?
            }
            None => SocketAddr::from_pathname(name)?,
        };
        let socket = UnixDatagram::unbound()?;
        // A full queue at the service manager must never hold up a renewal
        // or a release: such a message is dropped (the next one says more).
        socket.set_nonblocking(true)?;
        Ok(NotifySocket { socket, to })
    }

    /// Sends `message` (newline-separated assignments) as one datagram.
    pub fn send(&self, message: &str) -> io::Result<()> {
        self.socket
            .send_to_addr(message.as_bytes(), &self.to)
            .map(|_| ())
    }
}

/// This process's id, as `$WATCHDOG_PID` names the process the watchdog is for.
pub fn own_pid() -> u32 {
    std::process::id()
}

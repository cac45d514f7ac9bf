//! Starting, watching and stopping the servers of a backend: local processes on
//! loopback (the default), later Docker containers. (Owned by the backends work.)

//! Importers: Jepsen's EDN histories and Porcupine's etcd and kv logs, read into
//! lockcheck's history, each following its own source's semantics. (Owned by the
//! engine work.)

//! Models of the histories lockcheck imports: registers, cas-register,
//! multi-register, kv (Porcupine and Knossos corpora) and Knossos's mutex.

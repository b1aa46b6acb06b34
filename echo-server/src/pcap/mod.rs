//! Offline input: pcap and pcapng files, TCP reassembly of client streams, TLS decryption with keys carried in the capture.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kstreams_fuzz_harness::protobuf(data));

"""Property tests of codegen's config validator (hypothesis; run by ctest codegen_properties with
/usr/bin/python3, which has Debian's python3-hypothesis)."""

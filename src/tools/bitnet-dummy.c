/* PLACEHOLDER: not written yet (issue #2 work in progress). */
int main(void) { return 1; }

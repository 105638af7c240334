// WebAuthn ceremonies for pactd's pages (the only script pactd serves).

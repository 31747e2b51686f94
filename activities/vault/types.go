package vault

package vaultapi

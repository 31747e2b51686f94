package sshpool

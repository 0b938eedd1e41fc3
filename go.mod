module github.com/spentledger/spent

go 1.26.0

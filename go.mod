module github.com/ctxcompact/ctxcompact

go 1.26.8

require (
	github.com/dlclark/regexp2/v2 v2.5.1
	github.com/ncruces/go-sqlite3 v0.37.0
	github.com/stretchr/testify v1.12.1
	github.com/tetratelabs/wazero v1.12.0
	github.com/tidwall/gjson v1.20.3
	github.com/tidwall/sjson v1.2.9
	github.com/tiktoken-go/tokenizer v0.10.0
)

require (
	github.com/ncruces/go-sqlite3-wasm/v6 v6.5.35401 // indirect
	github.com/ncruces/julianday v1.0.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

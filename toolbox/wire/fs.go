package wire

// UploadedFileV2 is the answer of POST /files/upload-v2.
type UploadedFileV2 struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

// Match is one line found by GET /files/find.
type Match struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// SearchFilesResponse answers GET /files/search.
type SearchFilesResponse struct {
	Files []string `json:"files"`
}

// ReplaceRequest is the body of POST /files/replace.
type ReplaceRequest struct {
	Files    []string `json:"files"`
	Pattern  string   `json:"pattern"`
	NewValue *string  `json:"newValue"`
}

// ReplaceResult is the outcome for one file of a replace.
type ReplaceResult struct {
	File    string `json:"file"`
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
}

// FilesDownloadRequest is the body of POST /files/bulk-download.
type FilesDownloadRequest struct {
	Paths []string `json:"paths"`
}

// FileInfo is the daemon's FileInfo. Owner and group are numeric ids.
type FileInfo struct {
	Group       string `json:"group"`
	IsDir       bool   `json:"isDir"`
	ModTime     string `json:"modTime"`
	Mode        string `json:"mode"`
	ModifiedAt  string `json:"modifiedAt"`
	Name        string `json:"name"`
	Owner       string `json:"owner"`
	Permissions string `json:"permissions"`
	Size        int64  `json:"size"`
	// Path is the entry's absolute path, which later toolbox releases add
	// so that a listing deeper than one level says where each entry is.
	Path string `json:"path,omitempty"`
}

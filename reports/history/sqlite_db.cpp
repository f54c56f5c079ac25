#include "reports/history/sqlite_db.h"

#include <sys/stat.h>

#include <cctype>
#include <type_traits>

#include "engine/common/error.h"

namespace ds::report::history {

namespace {

// What a statement does, in words: error messages name the operation, never the internal SQL.
std::string operationOf(const std::string& sql) {
  std::size_t b = sql.find_first_not_of(" \t\n");
  std::string word;
  for (std::size_t i = b;
       i != std::string::npos && i < sql.size() && std::isalpha(static_cast<unsigned char>(sql[i])); ++i)
    word += static_cast<char>(std::toupper(static_cast<unsigned char>(sql[i])));
  if (word == "SELECT" || word == "WITH") return "reading the history";
  if (word == "INSERT" || word == "UPDATE" || word == "DELETE" || word == "REPLACE") return "storing a run";
  if (word == "CREATE" || word == "ALTER" || word == "DROP") return "setting up the history's tables";
  if (word == "BEGIN" || word == "COMMIT" || word == "ROLLBACK" || word == "SAVEPOINT" || word == "RELEASE")
    return "a transaction";
  if (word == "PRAGMA") return "reading the database's settings";
  return "a database operation";
}

}  // namespace

Database::Database(const std::string& path, Mode mode, int busyTimeoutMs) : path_(path) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (mode == Mode::kExisting && !exists)
    throw ConfigError(
        fmt::format("there is no history database at '{}'; create one with `dsreport ingest "
                    "RUN.json... --db {}`, or pass the right --db",
                    path, path));
  if (exists && S_ISDIR(st.st_mode))
    throw ConfigError(fmt::format(
        "'{}' is a directory, not a history database; give a file, e.g. --db {}/history.sqlite", path, path));
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (mode == Mode::kCreate) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw IoError(
        fmt::format("cannot open the history database '{}': {}. Check the path, and that its folder exists and "
                    "is writable by this user (SQLite writes {}-wal and {}-shm beside it).",
                    path, msg, path, path));
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busyTimeoutMs);
}

Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

void Database::fail(const std::string& what, int rc) const {
  // SQLite's own text, never the statement: it names the problem ("database is locked", "file is not a
  // database", "no such table: runs"), while the SQL is ours and means nothing to the reader.
  const std::string sqliteSays = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string problem, todo;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      problem = "it is locked: another process held its write lock for longer than the busy timeout";
      todo = "Retry when that process is done, or wait longer with --busy-timeout-ms.";
      break;
    case SQLITE_NOTADB:
      problem = "the file is not a SQLite database";
      todo = "Point --db at a dsreport history database, or at a new file to start one.";
      break;
    case SQLITE_CORRUPT:
      problem = "the database file is damaged";
      todo = "Restore it from a backup, or start a new history with another --db and ingest the result files "
             "again (ingesting is idempotent).";
      break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH:
      problem = "it cannot be opened for writing";
      todo = fmt::format("Check that the file and its folder are writable by this user: SQLite writes {}-wal "
                         "and {}-shm beside it.", path_, path_);
      break;
    case SQLITE_FULL:
      problem = "the disk is full";
      todo = "Free some space and run it again; nothing of this call was stored.";
      break;
    case SQLITE_IOERR:
      problem = "the file system reported an I/O error";
      todo = "Check the disk, and keep the database on a local file system (SQLite's WAL mode does not work "
             "over NFS).";
      break;
    case SQLITE_NOMEM:
      problem = "SQLite ran out of memory";
      todo = "Free memory on this machine and run it again.";
      break;
    case SQLITE_ERROR:
    case SQLITE_SCHEMA:
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
      problem = "its tables are not what this dsreport expects";
      todo = "It was changed by another tool or is damaged: use another --db, and ingest the result files "
             "again.";
      break;
    default:
      problem = "SQLite refused it";
      todo = "If it persists, start a new history with another --db.";
  }
  throw IoError(fmt::format("history database '{}': {} failed: {} (SQLite: {}, code {}). {}", path_, what,
                            problem, sqliteSays, rc, todo));
}

void Database::exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) fail(operationOf(sql), rc);
}

std::int64_t Database::queryInt(const std::string& sql) {
  Statement st(*this, sql);
  return st.step() ? st.integer(0) : 0;
}

std::string Database::queryText(const std::string& sql) {
  Statement st(*this, sql);
  return st.step() ? st.text(0) : std::string();
}

int Database::changes() const { return sqlite3_changes(db_); }

Statement::Statement(Database& db, const std::string& sql) : db_(db) {
  int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) db.fail(operationOf(sql), rc);
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int i, const std::string& v) {
  int rc = sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.fail("binding a parameter", rc);
  return *this;
}

Statement& Statement::bind(int i, std::int64_t v) {
  int rc = sqlite3_bind_int64(stmt_, i, v);
  if (rc != SQLITE_OK) db_.fail("binding a parameter", rc);
  return *this;
}

Statement& Statement::bind(int i, double v) {
  int rc = sqlite3_bind_double(stmt_, i, v);
  if (rc != SQLITE_OK) db_.fail("binding a parameter", rc);
  return *this;
}

RowInserter::RowInserter(Database& db, std::string verb, std::string table)
    : db_(db), verb_(std::move(verb)), table_(std::move(table)) {}

RowInserter::~RowInserter() = default;

void RowInserter::insert(std::initializer_list<Column> row) {
  if (!stmt_) {
    std::string names, marks;
    for (const auto& c : row) {
      names += fmt::format("{}{}", columns_.empty() ? "" : ", ", c.name);
      columns_.emplace_back(c.name);
      marks += fmt::format("{}?{}", columns_.size() > 1 ? ", " : "", columns_.size());
    }
    stmt_ = std::make_unique<Statement>(
        db_, fmt::format("{} INTO {} ({}) VALUES ({})", verb_, table_, names, marks));
  }
  DS_CHECK(row.size() == columns_.size(), "a row for {} has {} columns, the first had {}", table_, row.size(),
           columns_.size());
  int i = 0;
  for (const auto& c : row) {
    DS_CHECK(columns_[i] == c.name, "a row for {} names column {} as '{}', the first named it '{}'", table_,
             i + 1, c.name, columns_[i]);
    ++i;
    std::visit(
        [&](const auto& v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>)
            stmt_->bindNull(i);
          else
            stmt_->bind(i, v);
        },
        c.value);
  }
  stmt_->run();
}

Statement& Statement::bindNull(int i) {
  int rc = sqlite3_bind_null(stmt_, i);
  if (rc != SQLITE_OK) db_.fail("binding a parameter", rc);
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail(operationOf(sqlite3_sql(stmt_)), rc);
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
}

std::int64_t Statement::integer(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::real(int col) const { return sqlite3_column_double(stmt_, col); }
bool Statement::isNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

WriteTransaction::WriteTransaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

WriteTransaction::~WriteTransaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void WriteTransaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace ds::report::history

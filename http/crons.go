package http

import (
	"log/slog"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// The cron routes of SPEC §8.1.3. Names are percent-decoded path segments;
// query strings are ignored.

func pathName(c echo.Context, param string) (string, error) {
	name, err := url.PathUnescape(c.Param(param))
	if err != nil {
		return "", protocol.Invalid("invalid path parameter: %s", err.Error())
	}
	return name, nil
}

func (a *API) listCrons(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	res, err := a.engine.CronGroups(c.Request().Context())
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, res)
}

func (a *API) deleteCrons(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	res, err := a.engine.DeleteCronGroups(c.Request().Context())
	if err != nil {
		return err
	}
	a.logCronChange(c, "deleted: every group", "*", "")
	return a.reply(c, http.StatusOK, res)
}

func (a *API) getCronGroup(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	group, err := pathName(c, "group")
	if err != nil {
		return err
	}
	g, err := a.engine.CronGroup(c.Request().Context(), group)
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, g)
}

func (a *API) putCronGroup(c echo.Context) error {
	var req protocol.CronGroupRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	group, err := pathName(c, "group")
	if err != nil {
		return err
	}
	g, err := a.engine.PutCronGroup(c.Request().Context(), group, &req)
	if err != nil {
		return err
	}
	a.logCronChange(c, "replaced", group, "", slog.Int("entries", len(req.Entries)))
	return a.reply(c, http.StatusOK, g)
}

func (a *API) patchCronGroup(c echo.Context) error {
	var req protocol.CronGroupPatch
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	group, err := pathName(c, "group")
	if err != nil {
		return err
	}
	g, err := a.engine.PatchCronGroup(c.Request().Context(), group, &req)
	if err != nil {
		return err
	}
	a.logCronChange(c, "updated", group, "")
	return a.reply(c, http.StatusOK, g)
}

func (a *API) deleteCronGroup(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	group, err := pathName(c, "group")
	if err != nil {
		return err
	}
	if err := a.engine.DeleteCronGroup(c.Request().Context(), group); err != nil {
		return err
	}
	a.logCronChange(c, "deleted", group, "")
	return c.NoContent(http.StatusNoContent)
}

func (a *API) postCronEntry(c echo.Context) error {
	var req protocol.CronEntryRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	group, err := pathName(c, "group")
	if err != nil {
		return err
	}
	en, err := a.engine.PutCronEntry(c.Request().Context(), group, *req.Name, &req, true)
	if err != nil {
		return err
	}
	a.logCronChange(c, "created", group, *req.Name)
	return a.reply(c, http.StatusCreated, en)
}

func (a *API) putCronEntry(c echo.Context) error {
	var req protocol.CronEntryPutRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	group, err := pathName(c, "group")
	if err != nil {
		return err
	}
	name, err := pathName(c, "entry")
	if err != nil {
		return err
	}
	en, err := a.engine.PutCronEntry(c.Request().Context(), group, name, &req.CronEntryRequest, false)
	if err != nil {
		return err
	}
	a.logCronChange(c, "replaced", group, name)
	return a.reply(c, http.StatusOK, en)
}

func (a *API) getCronEntry(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	group, name, err := cronEntryPath(c)
	if err != nil {
		return err
	}
	en, err := a.engine.CronEntry(c.Request().Context(), group, name)
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, en)
}

func (a *API) patchCronEntry(c echo.Context) error {
	var req protocol.CronEntryPatch
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	group, name, err := cronEntryPath(c)
	if err != nil {
		return err
	}
	en, err := a.engine.PatchCronEntry(c.Request().Context(), group, name, &req)
	if err != nil {
		return err
	}
	a.logCronChange(c, "updated", group, name)
	return a.reply(c, http.StatusOK, en)
}

func (a *API) deleteCronEntry(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	group, name, err := cronEntryPath(c)
	if err != nil {
		return err
	}
	if err := a.engine.DeleteCronEntry(c.Request().Context(), group, name); err != nil {
		return err
	}
	a.logCronChange(c, "deleted", group, name)
	return c.NoContent(http.StatusNoContent)
}

func cronEntryPath(c echo.Context) (group, entry string, err error) {
	if group, err = pathName(c, "group"); err != nil {
		return "", "", err
	}
	entry, err = pathName(c, "entry")
	return group, entry, err
}
